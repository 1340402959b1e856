"""The one verdict: which G, how sure, what else is as good, in one line of words (torch-free).

``fit``, ``recommend``, ``report``, ``answer`` and the demo's last line all come from ``verdict``, whatever they
hold: a fit (sweeps.fit.LawFit's JSON), a recommendation (service.schemas.Recommendation's) or a cheap answer
(sweeps.answer.Answer's). It reads recommended_group_size, g_star, g_star_ci95, evidence, evidence_reason,
status, message and, where there, equivalent_group_sizes or tie_set, g_star_bound and comparison.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def fmt(v: float | None, digits: int = 3) -> str:
    """A number as the answers write it (``digits`` significant), ``-`` for none."""
    return "-" if v is None else f"{v:.{digits}g}"


def as_good(g: int, ties: Sequence[int]) -> str:
    """What else does as well as the recommended ``g``: ``ties``, the grid's G the data cannot tell from it
    (a tie set), in words: "anything from 2 to 4 is as good" for consecutive G, "G = 4 and 8 are as good" on a
    sparse grid (a range would promise 5, 6 and 7), "G = 4 is clearly best" for none."""
    ties = sorted(ties)
    if len(ties) < 2:
        return f"G = {g} is clearly best"
    if ties == list(range(ties[0], ties[-1] + 1)):
        return f"anything from {ties[0]} to {ties[-1]} is as good"
    return f"G = {', '.join(map(str, ties[:-1]))} and {ties[-1]} are as good"


def _bound(bound: Mapping[str, Any], g: int) -> str:
    """A one-sided G*: a fit's {side, group_size} or an answer's {side, value, group_size}; ``g`` the recommended G."""
    edge = "largest" if bound["side"] == "above" else "smallest"
    if bound.get("value") is not None:
        least = "at least" if bound["side"] == "above" else "at most"
        if g != bound["group_size"]:
            return f"G* is {least} {bound['value']:.3g} (its interval is open), and its estimate picks G = {g}"
        pick = f"G* is {least} {bound['value']:.3g}, so the grid's {edge} G ({bound['group_size']}) is the pick"
        return pick if bound["side"] == "below" and bound["group_size"] <= 2 else f"{pick}; extend the grid"  # no G below 2
    return f"G* lies {bound['side']} the grid's edge ({bound['group_size']})"


def _empirical(x: Mapping[str, Any]) -> str:
    """The paired comparison behind evidence ``empirical`` (sweeps.fit.paired), in its own words."""
    c = x.get("comparison") or {}
    if not c:
        return (
            f"G = {x['recommended_group_size']} is measured best by a paired comparison; the law does not describe these points"
        )
    size = f"margin {fmt(c.get('margin'))}, d = {fmt(c.get('effect_size'))}"
    return f"{c['message']} ({size}); the law does not describe these points"


def verdict(x: Mapping[str, Any]) -> str:
    """The answer in words, with its evidence and interval: the last line a user reads."""
    g, ci, evidence = x.get("recommended_group_size"), x.get("g_star_ci95"), x.get("evidence")
    reason = x.get("evidence_reason") or x.get("message") or x.get("status", "")
    if g is None:
        c = x.get("comparison")
        lowest = f"; {c['message']} in paired comparisons over seeds: add seeds" if c else ""
        return f"no G to recommend ({x.get('status', '-')}): {reason}{lowest}"
    if evidence == "empirical":
        return f"use G = {g}, empirical evidence: {_empirical(x)}"
    closed = ci is not None and len(ci) == 2 and None not in ci
    if ci is not None and closed:
        interval = f"G* = {fmt(x.get('g_star'))}, 95% CI [{fmt(ci[0])}, {fmt(ci[1])}]"
    elif ci is not None and ci and ci[0] is not None:
        interval = f"G* = {fmt(x.get('g_star'))}, 95% CI [{fmt(ci[0])}, open above)"
    else:
        interval = "G* has no interval"
    ties = x.get("equivalent_group_sizes") or x.get("tie_set") or []
    if len(ties) < 2 and ci is not None and closed:  # a recommendation has no tie set: the law's picks over the interval
        from sweeps.fit import tie_set  # numpy and scipy: kept off the CLI's import path (its --help stays light)

        ties = tie_set(ci[0], ci[1], range(2, int(ci[1]) + 2))
    alike = _bound(x["g_star_bound"], g) if x.get("g_star_bound") else as_good(g, ties)
    if evidence == "none":
        return f"use G = {g} if you must: G barely matters here, any G in the grid does about as well ({interval}); {reason}"
    if evidence == "strong":
        return f"use G = {g}, strong evidence: {alike} ({interval})"
    return f"use G = {g}, {evidence or 'unassessed'} evidence: {alike} ({interval}); {reason}"

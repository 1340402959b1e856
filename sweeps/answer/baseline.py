"""Keep the G the user trains with, or move: the answer's decision on ``answer.baseline_group_size`` (torch-free).

Three kinds of evidence can say "move" (THEORY.md, "Keep or move"); each one's error is a one-sided 2.5%:

- measured: on the halving's first rung the gain D = gap(b) - gap(r) of the recommended G = r over the user's
  G = b has a 95% interval above 0 (a measured loss, the interval below 0, keeps b whatever else says);
- filtered (dynamic sampling): the probe's law of a step of B trained informative completions (F(G; inf),
  sweeps.dynamic_sampling) puts the recommended G below b in at least 97.5% of its resamples of the prompts;
- modelled: the 95% interval [lo, hi] of G* *at the spec's T* (``at_t``: the estimate follows G* to T, or the
  measure does not train) is closed and the law gap(G) = a + beta (G + (G* - 1)^2 / (G - 1)) puts some grid G = r
  below b for every G* in it. gap(b) - gap(r) = beta ((b - r) + (G* - 1)^2 (1 / (b - 1) - 1 / (r - 1))) is
  monotone in G*, so both ends decide; r is the G of the largest gain at the worse end (in units of beta).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from sweeps.answer.result import Baseline, Regret

ONE_SIDED = 0.025  # every move's error: a one-sided 2.5% (the 95% interval's lower end, or 97.5% of resamples)


def law_gain(base: float, move: float, g_star: float) -> float:
    """(gap(base) - gap(move)) / beta on the law's shape G + (G* - 1)^2 / (G - 1): positive where ``move`` is the
    better G for this G*. Group sizes > 1, G* >= 1."""
    x = (g_star - 1.0) ** 2
    return (base - move) + x * (1.0 / (base - 1.0) - 1.0 / (move - 1.0))


def modelled_move(base: int, lo: float, hi: float, candidates: Sequence[int]) -> tuple[int, float] | None:
    """(r, its gain at the worse end of [lo, hi], in units of beta): the grid G that beats ``base`` for every G* in
    the closed interval [lo, hi] by the most at its worse end; None when no G does (or the interval is open)."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or base < 2:
        return None
    gains = {r: min(law_gain(base, r, lo), law_gain(base, r, hi)) for r in candidates if r >= 2 and r != base}
    best = max(gains, key=gains.__getitem__, default=None)
    return (best, gains[best]) if best is not None and gains[best] > 0 else None


def keep_or_move(
    base: int,
    rec: int,
    gain_of: Callable[[int], Regret],
    metric: str,
    at_t: tuple[float, float] | None = None,
    candidates: Sequence[int] = (),
    filtered: float | None = None,
) -> Baseline:
    """Keep the user's G = ``base`` unless moving measurably pays, or, where that is not measured, every G* of
    ``at_t`` (the answer's closed interval of G* at T; None: not at T) puts a grid G of ``candidates`` below it on
    the law, or, under dynamic sampling, ``filtered`` (the share of the probe's resamples in which the filtered law
    puts ``rec`` below ``base``) is at least 1 - ONE_SIDED (module docstring). ``gain_of(r)``: metric(base) - metric(r)
    on the first rung's law curve, a Regret of ``base`` against ``r`` (value None, with its reason, where nothing was
    measured); a measured loss always keeps."""
    if rec == base:
        return _keep(base, gain_of(rec), f"G = {base} is the answer's G")
    gain = gain_of(rec)
    if gain.ci95 is not None and gain.ci95[0] > 0:
        return _move(base, rec, gain, f"move to G = {rec}: it pays ({_measured(gain, metric)})")
    if gain.ci95 is not None and gain.ci95[1] < 0:
        return _keep(base, gain, f"keep G = {base}: moving to G = {rec} is a measured loss ({_measured(gain, metric)})")
    if filtered is not None and filtered >= 1.0 - ONE_SIDED:
        said = f"the filtered law puts G = {rec} below G = {base} in {filtered:.1%} of the probe's resamples"
        measured = f"; measured: {_measured(gain, metric)}" if gain.ci95 is not None else ""
        return _move(base, rec, gain, f"move to G = {rec}: under dynamic sampling {said}{measured}")
    if at_t is not None and (move := modelled_move(base, *at_t, candidates)) is not None:
        r = move[0]
        gain_r = gain if r == rec else gain_of(r)
        said = f"for every G* in its 95% interval [{at_t[0]:.3g}, {at_t[1]:.3g}] at T the law puts G = {r} below G = {base}"
        if gain_r.ci95 is not None and gain_r.ci95[1] < 0:
            return _keep(base, gain_r, f"keep G = {base}: {said}, but the move is a measured loss ({_measured(gain_r, metric)})")
        measured = f"; measured: {_measured(gain_r, metric)}" if gain_r.ci95 is not None else ""
        return _move(base, r, gain_r, f"move to G = {r}: {said}{measured}")
    if gain.ci95 is None:
        why = gain.reason or "the gain has no interval"
        return _keep(base, gain, f"keep G = {base}: whether G = {rec} does better is not measured at this budget ({why})")
    said = f"at this budget no G is measurably better ({_measured(gain, metric)} includes 0 or favours G = {base})"
    return _keep(base, gain, f"keep G = {base}: {said}")


def _measured(gain: Regret, metric: str) -> str:
    """The measured gain and its interval in words (``gain.ci95`` set)."""
    ci = gain.ci95 or []
    return f"{metric} {gain.value:+.3g} at G = {gain.group_size} against G = {gain.versus}, 95% CI [{ci[0]:.3g}, {ci[1]:.3g}]"


def _keep(base: int, gain: Regret, reason: str) -> Baseline:
    return Baseline(group_size=base, action="keep", use_group_size=base, gain=gain, reason=reason)


def _move(base: int, to: int, gain: Regret, reason: str) -> Baseline:
    return Baseline(group_size=base, action="move", use_group_size=to, gain=gain, reason=reason)

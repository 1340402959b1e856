"""The sweep report: one self-contained HTML file a person reads (plots inlined, no network needed).

Gap vs G per budget with the fitted curves and the seed means (sweeps.plots.plot_fit), G* over
training time (eval.every), the probe's and a cheap answer's G* beside the sweep's, both universality verdicts (across
budgets and across T), the evidence statement and the recommendation. Written by
`groupscale report ID` and logged as ``report.html`` on the sweep's parent run.
"""

from __future__ import annotations

import base64
import io
from html import escape

from matplotlib.figure import Figure

from sweeps.fit import LawFit
from sweeps.plots import plot_fit, plot_g_star_over_time
from sweeps.spec import ModelSpec
from sweeps.verdict import fmt, verdict

_STYLE = (
    "body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;line-height:1.45;color:#222}"
    "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.2rem .5rem;text-align:right}"
    ".evidence-strong{color:#176f2c}.evidence-weak{color:#9a6700}.evidence-none{color:#b3261e}"
)


def _png(fig: Figure) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return f'<img alt="plot" src="data:image/png;base64,{base64.b64encode(buf.getvalue()).decode()}">'


def render_report(
    fit: LawFit,
    title: str,
    probe: dict | None = None,
    answer: dict | None = None,
    *,
    spec: dict | None = None,
    created: str | None = None,
    trials: list[dict] | None = None,
) -> str:
    """The report as one HTML string.

    Args:
        fit: the sweep's fit (GET /v1/sweeps/{id}/fit).
        title: the sweep's name and id.
        probe: a probe's result (GET /v1/probes/{id} ``result``) to set beside the sweep's G*, or None.
        answer: a `groupscale answer` result (GET /v1/answers/{id} ``result``, sweeps.answer) likewise, or None.
        spec: the sweep's spec as JSON (SweepSpec.model_dump(mode="json")): what was swept, in the header.
        created: when the sweep was submitted (ISO 8601), in the header.
        trials: the sweep's trials (GET /v1/sweeps/{id}/trials: group_size, samples_per_step, metrics): groups_table.
    """
    lo, hi = fit.g_star_ci95 or [None, None]
    tied = fit.equivalent_group_sizes
    level = fit.evidence or "none"
    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>{escape(title)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{escape(title)}</h1>",
        swept_paragraph(spec, created),
        "<h2>Answer</h2>",
        f"<p id='verdict'><b>{escape(verdict(fit.model_dump(mode='json')))}</b></p>",
        f"<p id='recommendation'>Recommended G: <b>{fit.recommended_group_size or 'none'}</b>"
        + (f" (indistinguishable: {', '.join(map(str, tied))})" if len(tied) > 1 else "")
        + f"; G* = {fmt(fit.g_star)}, 95% interval [{fmt(lo)}, {fmt(hi)}]; status {fit.status}.</p>",
        f"<p id='evidence' class='evidence-{escape(level)}'>Evidence: <b>{escape(level)}</b> ({escape(fit.evidence_reason)})</p>",
        f"<p>{escape(fit.message)}</p>",
        "<h2>Gap against G</h2>",
        _png(plot_fit(fit, title)),
        "<table><tr><th>B</th><th>G</th><th>mean</th><th>se</th><th>seeds</th></tr>",
    ]
    for b in fit.per_budget:
        for p in b.points:
            parts.append(
                f"<tr><td>{b.samples_per_step}</td><td>{p['group_size']}</td><td>{fmt(p['mean'], 4)}</td>"
                f"<td>{fmt(p['se'], 2)}</td><td>{p['n_seeds']}</td></tr>"
            )
    parts.append("</table>" + groups_table(trials) + universality_section(fit, title))
    parts.append("<h2>The probe</h2>\n" + probe_paragraph(fit, probe))
    parts.append("<h2>The cheap answer</h2>")
    parts.append(answer_paragraph(fit, answer))
    parts.append("</body></html>")
    return "\n".join(parts)


NO_TIME_TEST = "no eval.every checkpoints: no test"


def universality_section(fit: LawFit, title: str) -> str:
    """Whether G* holds across budgets and training time: the tests in words, G* over time plotted and tabled."""
    uni, time = fit.universality, fit.time_universality
    parts = [
        "<h2>Is G* universal?</h2>",
        f"<p id='across-budgets'>Across budgets: {escape(uni.message) if uni else 'one budget: no test'}.</p>",
        f"<p id='across-time'>Across training time: {escape(time.message) if time else NO_TIME_TEST}.</p>",
    ]
    over_time = plot_g_star_over_time(fit, title)
    if over_time is not None:
        parts.append(_png(over_time))
    if fit.by_step:
        parts.append("<table><tr><th>step</th><th>status</th><th>G*</th><th>95% interval</th><th>recommended G</th></tr>")
        for s in fit.by_step:
            sci = s.g_star_ci95 or [None, None]
            parts.append(
                f"<tr><td>{s.step}</td><td>{s.status}</td><td>{fmt(s.g_star)}</td>"
                f"<td>[{fmt(sci[0])}, {fmt(sci[1])}]</td><td>{s.recommended_group_size or '-'}</td></tr>"
            )
        parts.append("</table>")
    return "\n".join(parts)


def probe_paragraph(fit: LawFit, probe: dict | None) -> str:
    """A probe's G* (GET /v1/probes/{id} ``result``) beside the sweep's, and whether they agree; or how to add one."""
    if not probe:
        return "<p id='probe'>No probe given (groupscale report ID --probe PROBE_ID).</p>"
    pci = probe.get("g_star_ci95") or [None, None]
    return (
        f"<p id='probe'>Probe G* = {fmt(probe.get('g_star'))} [{fmt(pci[0])}, {fmt(pci[1])}] (use G = "
        f"{probe.get('recommended_group_size') or '-'}) against the sweep's {fmt(fit.g_star)}. {agreement(fit, probe)}</p>"
    )


GROUP_SHARES = ("frac_groups_all_wrong", "frac_groups_all_right", "frac_groups_identical", "truncation_rate")


def groups_table(trials: list[dict] | None) -> str:
    """What each G's gradients saw: per (B, G), the mean over its trials that kept them (succeeded and no_signal; the
    fit leaves no_signal trials out, whichever engine ran them) of the shares of groups without signal by cause and of
    truncated completions, each a mean over the trial's steps (sweeps.metrics.SUMMARIZED), and the realized group
    sizes' range (a trial where it was not G failed)."""
    if not trials:
        return "<p id='groups'>The trials' groups: not given.</p>"
    kept: dict[tuple[int, int], list[dict]] = {}
    for t in trials:
        m = t.get("metrics") or {}
        if m.get("realized_group_size_min") is not None:  # a trial that kept them (not a failed one)
            kept.setdefault((t["samples_per_step"], t["group_size"]), []).append(m)
    if not kept:
        return "<p id='groups'>No trial kept what its groups held.</p>"
    rows = []
    for (b, g), ms in sorted(kept.items()):
        means = [[m[k] for m in ms if m.get(k) is not None] for k in GROUP_SHARES]
        lo, hi = min(m["realized_group_size_min"] for m in ms), max(m["realized_group_size_max"] for m in ms)
        cells = "".join(f"<td>{fmt(sum(v) / len(v) if v else None, 2)}</td>" for v in means)
        realized = f"{lo:g}" if lo == hi else f"{lo:g}-{hi:g}"
        rows.append(f"<tr><td>{b}</td><td>{g}</td>{cells}<td>{realized}</td><td>{len(ms)}</td></tr>")
    names = ("B", "G", "all wrong", "all right", "identical", "truncated", "realized G", "trials")
    head = "".join(f"<th>{h}</th>" for h in names)
    return (
        "<h2>What the groups held</h2><p>Shares of groups without signal by cause and of truncated completions, means "
        f"over each (B, G)'s trials and their steps.</p><table id='groups'><tr>{head}</tr>{''.join(rows)}</table>"
    )


def swept_paragraph(spec: dict | None, created: str | None) -> str:
    """What was swept: task, model, how a dataset task's prompts reach it, measure, steps, the grid, seeds, the GRPO
    settings that change G*, and when."""
    if not spec:
        return "<p id='swept'>What was swept: not given.</p>"
    model = ModelSpec.model_validate(spec["model"]).label
    grpo = spec.get("grpo") or {}
    settings = ", ".join(f"{k} {grpo[k]}" for k in ("lr", "advantage", "loss_type", "temperature", "max_new_tokens") if k in grpo)
    measure = (spec.get("measure") or {}).get("kind", "outcome")
    per_prompt = (
        " (grpo.allocation per_prompt: the G of prompts not seen yet; the others' follow the probe's pass-rate table, so "
        "this G axis is not a uniform G's)"
    ) if grpo.get("allocation") == "per_prompt" else ""  # fmt: skip
    rows = [
        ("task", spec["task"].get("label") or spec["task"].get("name", "?")),
        ("model", model),
        *([("prompts", prompts)] if (prompts := prompts_line(spec["task"], spec["model"])) else []),
        ("measure", f"{measure}, {spec.get('steps', '?')} steps" if measure == "outcome" else measure),
        ("group sizes G", ", ".join(map(str, spec.get("group_sizes", []))) + per_prompt),
        ("budgets B", ", ".join(map(str, spec.get("samples_per_step", [])))),
        ("seeds", str(len(spec.get("seeds", [])))),
        ("engine", str(spec.get("engine", "groupscale"))),
        ("GRPO", settings or "defaults"),
        ("submitted", (created or "?")[:16].replace("T", " ") + (" UTC" if created else "")),
    ]
    cells = "".join(f"<tr><th>{escape(k)}</th><td style='text-align:left'>{escape(str(v))}</td></tr>" for k, v in rows)
    return f"<table id='swept'>{cells}</table>"


PROMPT_WORDS = {
    "chat": "each a user message through the model's chat template",
    "raw": "as they are",
    "auto": "through the model's chat template where it has one (each trial run's param task.prompt_format: which)",
}


def prompts_line(task: dict, model: dict) -> str | None:
    """How a dataset task's string prompts reach the model (None for another task): ``auto`` resolved where the spec
    tells (chat-tiny has a chat template; model.chat_template false renders none), and the template file's name."""
    if task.get("name") != "dataset":
        return None
    chosen = task.get("prompt_format", "auto")
    resolved = chosen
    if chosen == "auto" and model.get("chat_template") is False:
        resolved = "raw"
    elif chosen == "auto" and model.get("preset") == "chat-tiny":
        resolved = "chat"
    template = task.get("prompt_template")
    shown = f", formatted by {template.replace(chr(92), '/').rsplit('/', 1)[-1]}" if template else ""
    return f"string prompts {PROMPT_WORDS.get(resolved, resolved)} (task.prompt_format {chosen}){shown}"


def agreement(fit: LawFit, probe: dict) -> str:
    """Whether the probe's and the sweep's intervals overlap, and why they may not."""
    a, b = fit.g_star_ci95, probe.get("g_star_ci95")
    if not a or not b or None in a or None in b:
        return "Without both intervals there is no comparison."
    if a[0] <= b[1] and b[0] <= a[1]:
        return "Their intervals overlap: they agree."
    return (
        "Their intervals do not overlap. They may differ for good reasons: the probe measures the gradient "
        "noise at one policy (its interval covers only that sampling noise), while the sweep's G* comes from "
        "outcomes after T steps, as the policy moved; the outcome law also assumes a smooth objective and a constant step."
    )


def answer_agreement(fit: LawFit, answer: dict) -> str:
    """Whether a cheap answer's G is among a finished sweep's best, and which to trust when not (the sweep)."""
    rec, best = answer.get("recommended_group_size"), fit.recommended_group_size
    tied = fit.equivalent_group_sizes or ([best] if best is not None else [])
    if rec is not None and best is None and fit.evidence == "none":
        return (
            f"The sweep finds no G better than another beyond the seed noise, so the answer's G = {rec} does about as well "
            "as any; trust the sweep (it trained every G for the full T) over the answer's evidence."
        )
    if rec is None or best is None:
        return "No comparison: one of the two has no recommended G."
    if rec in tied:
        return f"Its G = {rec} is among the sweep's best ({', '.join(map(str, tied))})."
    return (
        f"Its G = {rec} is not among the sweep's best ({', '.join(map(str, tied))}): they disagree, and the sweep is "
        "the one to trust (it trained every G for the full T; the answer measured a fraction of that)."
    )


def answer_paragraph(fit: LawFit, answer: dict | None) -> str:
    """`groupscale answer`'s G, interval and cost set against the sweep's: did the cheap answer land in its tie set?"""
    if not answer:
        return "<p id='answer'>No answer given (groupscale report ID --answer ANSWER_ID).</p>"
    ci = answer.get("g_star_ci95") or [None, None]
    cost = answer.get("cost") or {}
    share = f" ({cost['fraction_of_grid']:.2%} of the grid)" if cost.get("fraction_of_grid") else ""
    rec, agree = answer.get("recommended_group_size"), answer_agreement(fit, answer)
    return (
        f"<p id='answer'>Answer G* = {fmt(answer.get('g_star'))} [{fmt(ci[0])}, {fmt(ci[1])}], use G = {rec or '-'}, "
        f"evidence {escape(str(answer.get('evidence')))}, for {cost.get('completions', '-')} sampled completions{share}. "
        f"{escape(agree)} {escape(answer.get('message', ''))}</p>"
    )

"""The sweep report (sweeps.report): one self-contained HTML file with the answer and its evidence."""

from sweeps.fit import fit_law
from sweeps.report import render_report

GRID = [2, 3, 4, 6, 8, 12, 16]


def law_fit():
    rows = [(g, 48, s, 0.2 + 0.01 * g + 0.09 / (g - 1) + 0.001 * ((g * 7 + s * 3) % 5 - 2)) for g in GRID for s in range(3)]
    return fit_law(*[list(c) for c in zip(*rows)])


def test_the_report_inlines_its_plots_and_states_answer_evidence_and_verdicts():
    fit = law_fit()
    html = render_report(fit, "unit (abc)")
    assert html.startswith("<!doctype html>") and html.count("data:image/png;base64,") == 1  # no G*(T): one plot
    assert f"Recommended G: <b>{fit.recommended_group_size}</b>" in html and f"Evidence: <b>{fit.evidence}</b>" in html
    assert "one budget: no test" in html and "no eval.every checkpoints" in html and "No probe given" in html


def test_a_probe_that_disagrees_is_said_to_and_why():
    fit = law_fit()
    far = {"g_star": 12.0, "g_star_ci95": [11.0, 13.0], "recommended_group_size": 12}
    near = {"g_star": fit.g_star, "g_star_ci95": fit.g_star_ci95, "recommended_group_size": fit.recommended_group_size}
    assert "do not overlap" in render_report(fit, "t", far) and "one policy" in render_report(fit, "t", far)
    assert "they agree" in render_report(fit, "t", near)


def test_a_cheap_answer_is_set_against_the_sweeps_best():
    fit = law_fit()
    cost = {"completions": 900, "fraction_of_grid": 0.009}
    inside = {"g_star": 4.0, "g_star_ci95": [3.5, 4.5], "recommended_group_size": 4, "evidence": "weak", "cost": cost}
    outside = {**inside, "recommended_group_size": 16}
    assert fit.recommended_group_size == 4 and 16 not in fit.equivalent_group_sizes
    assert "Its G = 4 is among the sweep&#x27;s best" in render_report(fit, "t", answer=inside)
    html = render_report(fit, "t", answer=outside)
    assert "Its G = 16 is not among the sweep&#x27;s best" in html and "900 sampled completions (0.90% of the grid)" in html
    assert "No answer given" in render_report(fit, "t")


def test_the_report_says_what_was_swept_and_when():
    from tests.factories import spec

    s = spec(group_sizes=[2, 4, 8], samples_per_step=[16, 32], seeds=[0, 1, 2], steps=40, grpo={"lr": 3e-5})
    html = render_report(law_fit(), "t", spec=s, created="2026-12-03T21:52:07.123456+00:00")
    header = html[html.index("<table id='swept'>") : html.index("</table>")]
    for cell in (
        "task</th><td style='text-align:left'>arithmetic",
        "model</th><td style='text-align:left'>tiny-llama",
        "outcome, 40 steps",
        "2, 4, 8",
        "16, 32",
        "seeds</th><td style='text-align:left'>3",
        "lr 3e-05",
        "2026-12-03 21:52 UTC",
    ):
        assert cell in header, (cell, header)
    assert html.index("id='swept'") < html.index("<h2>Answer</h2>")
    assert "What was swept: not given." in render_report(law_fit(), "t")
    assert "per_prompt" not in header
    per_prompt = render_report(law_fit(), "t", spec={**s, "grpo": {"allocation": "per_prompt"}})
    assert "2, 4, 8 (grpo.allocation per_prompt: the G of prompts not seen yet" in per_prompt


def test_the_fit_plot_ticks_at_the_swept_group_sizes():
    from sweeps.plots import plot_fit

    ax = plot_fit(law_fit(), "t").axes[0]
    assert [int(v) for v in ax.get_xticks()] == GRID
    assert [t.get_text() for t in ax.get_xticklabels()] == [str(g) for g in GRID]


def test_the_g_star_over_time_plot_reads_at_a_glance():
    """G* moving within less than a decade still gets y tick labels; the x ticks are the checkpoints; the verdict
    under the axes is whole (wrapped, not cut); without any finite interval the legend does not promise one."""
    from sweeps.fit import LawFit, StepFit, TimeUniversality
    from sweeps.plots import plot_g_star_over_time

    message = "one G* over training time is consistent with the data (slope of log G* on log T = -0.078, p = 0.45): " * 2
    steps = [StepFit(step=t, status="ok", g_star=g) for t, g in ((2, 6.23), (4, 6.0), (6, 5.9), (8, 5.97))]
    fig = plot_g_star_over_time(LawFit(status="ok", by_step=steps, time_universality=TimeUniversality(message=message)))
    ax = fig.axes[0]
    fig.canvas.draw()
    assert [t.get_text() for t in ax.get_xticklabels()] == ["2", "4", "6", "8"]
    assert len([t for t in ax.get_yticklabels() if t.get_text() and 5.9 <= t.get_position()[1] <= 6.23]) >= 1
    assert (
        " ".join(fig.texts[0].get_text().split()) == message.strip()
        and ax.get_legend().texts[0].get_text() == "G* (no finite interval)"
    )


def _trial(g, b, status, **metrics):
    return {"group_size": g, "samples_per_step": b, "status": status, "metrics": metrics}


def test_the_report_shows_per_g_what_the_groups_held_over_the_trials_that_kept_it():
    """One row per (B, G): the trials' means of the no-signal causes and truncation, the realized G's range, the
    trials counted; a failed trial (no summary) and a trial of another G stay out of a row."""
    kept = dict(realized_group_size_min=4.0, realized_group_size_max=4.0, frac_groups_identical=0.0, truncation_rate=0.1)
    trials = [
        _trial(4, 48, "succeeded", **kept, frac_groups_all_wrong=0.2, frac_groups_all_right=0.0),
        _trial(4, 48, "no_signal", **kept, frac_groups_all_wrong=0.6, frac_groups_all_right=0.1),
        _trial(4, 48, "failed"),  # its groups were cut: its result keeps nothing
        _trial(2, 48, "succeeded", **{**kept, "realized_group_size_min": 2.0, "realized_group_size_max": 3.0},
               frac_groups_all_wrong=None, frac_groups_all_right=0.5),
    ]  # fmt: skip
    html = render_report(law_fit(), "t", trials=trials)
    table = html[html.index("<table id='groups'>") :]
    table = table[: table.index("</table>")]
    rows = table.split("<tr>")[2:]
    assert rows[0] == "<td>48</td><td>2</td><td>-</td><td>0.5</td><td>0</td><td>0.1</td><td>2-3</td><td>1</td></tr>"
    assert rows[1] == "<td>48</td><td>4</td><td>0.4</td><td>0.05</td><td>0</td><td>0.1</td><td>4</td><td>2</td></tr>"
    assert "The trials' groups: not given." in render_report(law_fit(), "t")  # the signature as before
    assert "No trial kept what its groups held." in render_report(law_fit(), "t", trials=[_trial(4, 48, "failed")])


def test_the_report_says_how_a_dataset_tasks_string_prompts_reach_the_model():
    from sweeps.report import prompts_line

    dataset = {"name": "dataset", "path": "d.jsonl"}
    assert prompts_line({"name": "arithmetic"}, {"preset": "tiny-llama"}) is None
    assert prompts_line(dataset, {"preset": "chat-tiny"}) == (
        "string prompts each a user message through the model's chat template (task.prompt_format auto)"
    )
    assert prompts_line(dataset, {"path": "/m", "chat_template": False}) == "string prompts as they are (task.prompt_format auto)"
    assert prompts_line({**dataset, "prompt_format": "auto"}, {"path": "/m"}).startswith(
        "string prompts through the model's chat template where it has one (each trial run's param task.prompt_format"
    )
    templated = {**dataset, "prompt_format": "chat", "prompt_template": "/data/prompts/math.jinja"}
    assert prompts_line(templated, {"path": "/m"}).endswith("(task.prompt_format chat), formatted by math.jinja")
    html = render_report(law_fit(), "t", spec={"task": templated, "model": {"path": "/m"}})
    assert "prompts</th><td style='text-align:left'>string prompts each a user message" in html

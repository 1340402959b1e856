"""sweeps.verdict: one line for a fit, a recommendation and an answer; on the byo example's figures, answer, fit,
recommend and report tell one story; a kinked table gets evidence empirical everywhere."""

import numpy as np

from sweeps.answer import plan_answer
from sweeps.answer.combine import combine
from sweeps.fit import fit_law
from sweeps.report import answer_paragraph, render_report
from sweeps.spec import load_spec
from sweeps.verdict import verdict

# sweeps/examples/byo/spec.yaml's grid as the README runs it (seeds 0 and 1, B = 32), measured on 2 cores with
# bench/calibration.py's chat-byo grid: G = 4 lowest (0.619) against 0.656-0.702, as the report's table shows.
BYO = {2: [0.675, 0.6375], 4: [0.6125, 0.625], 8: [0.6708333333333333, 0.7333333333333333], 16: [0.65, 0.6541666666666667]}
KINK = {2: 0.70, 3: 0.66, 4: 0.62, 6: 0.67, 8: 0.66, 12: 0.70, 16: 0.66}


def _rows(table):
    return zip(*[(g, 32, s, y) for g, ys in table.items() for s, y in enumerate(ys)], strict=True)


def test_on_the_byo_figures_fit_report_and_answer_tell_one_story():
    fit = fit_law(*_rows(BYO))
    assert fit.status == "boundary" and fit.evidence == "none" and fit.recommended_group_size is None
    c = fit.comparison
    assert c.best == 4 and c.runner_up == 2 and not c.significant and c.n_pairs == 2  # two seeds cannot show it
    line = verdict(fit.model_dump(mode="json"))
    assert line.startswith("no G to recommend (boundary): the law does not fit better than a constant")
    assert "G = 4 has the lowest mean but is not shown better than G = 2" in line and "add seeds" in line
    html = render_report(fit, "byo", spec=None)
    assert "G = 4 has the lowest mean but is not shown better than G = 2" in html  # the report's verdict line
    # the answer at 1% of this small grid runs its probe only: G = 4 from the probe, and it does not claim G matters
    spec = load_spec("sweeps/examples/byo/spec.yaml")
    plan = plan_answer(spec)
    probe = {"g_star": 3.6, "g_star_ci95": [2.9, 4.8], "reward_mean": 0.35, "samples": plan.probe.cost, "prompts": 8}
    answer = combine(spec, plan, probe, None, None, plan.probe.cost, 1.0)
    assert answer.recommended_group_size == 4 and answer.evidence == "weak" and answer.g_matters is None
    # the user's G = 8 is kept: the probe alone does not show that moving pays (the fit's story: no G shown better)
    assert answer.message.startswith("keep G = 8: whether G = 4 does better is not measured at this budget")
    assert "; the estimate alone would say: use G = 4, weak evidence" in answer.message
    words = answer_paragraph(fit, answer.model_dump(mode="json"))
    assert "finds no G better than another beyond the seed noise" in words and "G = 4" in words


def test_a_kinked_table_is_empirical_in_the_fit_and_its_verdict():
    rng = np.random.default_rng(1)
    table = {g: [m + 0.004 * rng.normal() for _ in range(3)] for g, m in KINK.items()}
    fit = fit_law(*_rows(table)).model_dump(mode="json")
    assert fit["evidence"] == "empirical" and fit["recommended_group_size"] == 4
    line = verdict(fit)
    assert line.startswith("use G = 4, empirical evidence: G = 4 beats every other G in paired comparisons matched by seed")
    assert "the law does not describe these points" in line


def test_one_sided_answers_say_g_star_is_at_least_lo_and_take_the_largest_g():
    answer = {
        "recommended_group_size": 24,
        "g_star": 40.0,
        "g_star_ci95": [18.2, None],
        "g_star_bound": {"side": "above", "value": 18.2, "group_size": 24},
        "tie_set": [24],
        "evidence": "weak",
        "evidence_reason": "the interval of G* is open above",
    }
    line = verdict(answer)
    assert line.startswith("use G = 24, weak evidence: G* is at least 18.2, so the grid's largest G (24) is the pick")
    assert "[18.2, open above)" in line

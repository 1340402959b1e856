"""sweeps.answer: the budget's plan, the pass-rate rule, the tie set, regret on the law curve and the combined answer."""

import math

import numpy as np
import pytest

from sweeps.answer import BudgetTooSmall, grid_cost, grid_seconds, passrate_group_size, plan_answer, regret
from sweeps.answer.combine import combine as combine_answer
from sweeps.answer.cost import halving_cost
from sweeps.answer.plan import MIN_PROBE_PROMPTS
from sweeps.fit import law_curve, tie_set
from sweeps.spec import SweepSpec
from tests.factories import bandit_mse_spec
from tests.factories import spec as arithmetic_spec

BANDIT = bandit_mse_spec()
ARITH = arithmetic_spec(
    group_sizes=[2, 3, 4, 6, 8, 12, 16, 24],
    samples_per_step=[48, 96],
    seeds=list(range(5)),
    steps=100,
    eval={"prompts": 256, "every": 25},
)


def combine(*args, **kwargs) -> dict:
    """The Answer as the CLI and the API serve it (JSON)."""
    return combine_answer(*args, **kwargs).model_dump(mode="json")


def spec(base: dict, **changes) -> SweepSpec:
    return SweepSpec.model_validate({**base, **changes})


def test_grid_cost_counts_every_sampled_completion_by_hand():
    assert grid_cost(spec(BANDIT)) == 2 * 2 * 10 * 8  # G x seeds x draws x B
    arith = spec(ARITH, group_sizes=[2, 4], samples_per_step=[8], seeds=[0], steps=5, eval={"prompts": 16, "every": 0})
    assert grid_cost(arith) == 2 * (5 * 8 + 2 * 16)  # per trial: T x B, and the evals before step 1 and at T
    auto = spec(ARITH, group_sizes=[2], samples_per_step=[8], seeds=[0], steps=5, eval={"prompts": 16})
    assert grid_cost(auto) == 5 * 8 + 4 * 16  # the default: evals at 0, 2, 4 and 5 (every ceil(5 / 4) = 2 steps)
    every = spec(ARITH, group_sizes=[2], samples_per_step=[8], seeds=[0], steps=10, eval={"prompts": 16, "every": 5})
    assert grid_cost(every) == 10 * 8 + 3 * 16  # evals at 0, 5 and 10
    sampled = spec(
        ARITH,
        task={"name": "jsonl", "path": "x.jsonl", "reward": "numeric_match"},
        group_sizes=[2],
        samples_per_step=[8],
        seeds=[0],
        steps=5,
        eval={"prompts": 16, "samples_per_prompt": 4},
    )
    assert grid_cost(sampled) == 5 * 8 + 4 * 16 * 4  # no exact expected reward: k samples per eval prompt


def test_grid_seconds_price_training_and_eval_completions_by_hand():
    """Training completions at the training rate, evals' at the generation rate; a generation every k steps."""
    arith = spec(ARITH, group_sizes=[2, 4], samples_per_step=[8], seeds=[0, 1], steps=5, eval={"prompts": 16, "every": 0})
    assert grid_seconds(arith, 0.5, 0.1) == pytest.approx(4 * (5 * 8 * 0.5 + 2 * 16 * 0.1))
    k2 = spec(ARITH, group_sizes=[2], samples_per_step=[8], seeds=[0], steps=5, eval={"prompts": 16, "every": 0},
              grpo={"steps_per_generation": 2})  # fmt: skip
    assert grid_seconds(k2, 0.5, 0.1) == pytest.approx(3 * 8 * 0.5 + 2 * 16 * 0.1)  # ceil(5 / 2) generations of B


BANDIT_GRID = {**BANDIT, "group_sizes": [2, 3, 4, 6, 8, 12, 16, 24], "samples_per_step": [48]}
BANDIT_GRID["measure"] = {"kind": "gradient_mse"}  # 256 draws a trial


@pytest.mark.parametrize("base", [ARITH, BANDIT_GRID])
def test_no_plan_spends_more_than_its_budget(base):
    s = spec(base)
    grid = grid_cost(s)
    for budget in np.unique(np.geomspace(MIN_PROBE_PROMPTS * 16, grid // 5, 150).astype(int)):
        plan = plan_answer(s, int(budget))
        assert plan.cost <= budget, (budget, plan)
        if plan.halving is not None:
            h = plan.halving
            assert all(b == a // 2 for a, b in zip(h.survivors, h.survivors[1:], strict=False))  # Optuna keeps n // 2
            assert all(b == 2 * a or b == h.lengths[-1] for a, b in zip(h.lengths, h.lengths[1:], strict=False))
    big = plan_answer(s, grid // 10)
    assert big.halving is not None and (s.measure.kind == "gradient_mse" or big.pilot is not None)


def test_the_halvings_cost_by_hand():
    s = spec(ARITH, group_sizes=[2, 4, 8, 16], samples_per_step=[16])
    # rung 0: 4 G x 2 seeds x (3 steps x B 16 + evals before step 1 and at step 3 of 8 prompts) = 8 x 64
    # rung 1: 2 G x 2 seeds x (3 more steps x 16 + the eval at step 6) = 4 x 56
    assert halving_cost(s, 4, 2, (3, 6), 16, True, 8) == 8 * 64 + 4 * 56
    mse = spec(BANDIT_GRID)
    assert halving_cost(mse, 8, 2, (4, 8, 16), 48, False, 8) == 16 * 4 * 48 + 8 * 8 * 48 + 4 * 16 * 48  # drawn anew


def test_the_default_budget_is_one_percent_of_the_grid_and_too_small_a_budget_is_refused():
    s = spec(ARITH)
    assert plan_answer(s).budget == round(0.01 * grid_cost(s))
    assert plan_answer(spec(ARITH, answer={"budget": 5000})).budget == 5000
    with pytest.raises(BudgetTooSmall, match="at least 128"):
        plan_answer(s, MIN_PROBE_PROMPTS * 16 - 1)


def test_a_skipped_stage_says_what_every_stage_took_and_the_budget_that_would_run_it():
    """ "A 20% pilot pays for fewer than 2 steps at B = 32" left a user counting 500 / 32 = 15 steps: the probes and
    evals it left out took most of it. Each figure below adds up by hand."""
    s = spec(ARITH)
    plan = plan_answer(s, 1000)
    # the pilot's 20%: 200 = a probe of 8 x 16 + 2 evals of 32 prompts (exact reward: 1 completion each) + 8 left
    assert plan.skipped["pilot"].startswith(
        "its 20% of the budget, 200 completions, leaves 8 for training (0 steps at B = 48) after 1 probe of 128 and "
        "2 evals of 32: fewer than the 2 steps a pilot needs; a budget of "
    )
    # the halving: 1000 - the probe's 288 (0.3 x 1000 // 16 = 18 prompts x 16); 8 G x 2 seeds x (2 x 48 + 2 x 32)
    assert plan.skipped["halving"].startswith(
        "the 712 completions left after the probe (288) do not pay for the smallest halving: 8 G x 2 seeds x 2 steps "
        "at B = 48 with 2 evals of 32 each, 2560 completions; a budget of "
    )
    for stage, present in (("pilot", lambda p: p.pilot), ("halving", lambda p: p.halving)):
        need = int(plan.skipped[stage].rsplit("--budget ", 1)[1])
        assert present(plan_answer(s, need)) is not None and present(plan_answer(s, need - 1)) is None, stage
    tiny = spec(ARITH, steps=1)  # a pilot of T = 1 never reaches the 2 steps it needs, whatever the budget
    assert plan_answer(tiny, 1000).skipped["pilot"].endswith(f"no budget up to the grid's {grid_cost(tiny)} completions runs it")


def test_passrate_rule_by_hand():
    grid = [2, 4, 8, 16, 32]
    assert passrate_group_size(0.5, 0.05, grid) == 16  # 1 / (8 x 0.05 x 0.25) = 10
    assert passrate_group_size(0.5, 0.125, grid) == 4  # = 4
    assert passrate_group_size(0.1, 0.05, grid) == 32  # 27.8
    assert passrate_group_size(0.01, 0.05, grid) == 32  # beyond the grid: its largest G
    assert passrate_group_size(0.0, 0.05, grid) == passrate_group_size(None, 0.05, grid) == 32


def test_tie_set_is_what_the_law_picks_across_the_interval():
    # G* = 3.9: rho = 8.41, G + rho/(G-1) is 7.2 at 3, 6.8 at 4, 7.7 at 6; G* = 5.6: 11.05 at 4, 10.2 at 6, 11.0 at 8
    assert tie_set(3.9, 5.6, [2, 3, 4, 6, 8]) == [4, 6]
    assert tie_set(4.0, 4.0, [2, 3, 4, 6, 8]) == [4]
    assert tie_set(1.0, 100.0, [2, 3, 4, 6, 8]) == [2, 3, 4, 6, 8]


def _law_rows(a: float, b: float, c: float, noise: float, seeds: int = 3) -> list:
    rng = np.random.default_rng(0)
    return [
        (g, 48, s, float(law_curve(g, a, b, c)) + noise * rng.normal()) for g in (2, 3, 4, 6, 8, 12, 16) for s in range(seeds)
    ]


def test_regret_is_the_law_curve_difference_with_a_covering_interval():
    a, b, c = 1.0, 0.01, 0.1
    truth = float(law_curve(8, a, b, c) - law_curve(4, a, b, c))  # 0.04 - 0.1 (1/3 - 1/7) = 0.0210
    r = regret(_law_rows(a, b, c, 0.002), 8, 4, "gap").model_dump()
    assert r["value"] == pytest.approx(truth, rel=0.1)
    assert r["ci95"][0] < truth < r["ci95"][1] and r["ci95"][0] > 0  # worse than G = 4, and the data show it
    assert regret(_law_rows(a, b, c, 0.002), 4, 4, "gap").value == pytest.approx(0.0, abs=1e-12)


def test_a_regret_interval_is_never_narrower_than_the_laws_scatter():
    """Two seeds a G that happen to agree: resampling seeds within each G sees no noise and gave an interval of zero
    width, although the G-means scatter about the law by 0.02. The floor: 1.96 s sqrt(d' (X'X)^-1 d) by hand."""
    a, b, c, grid = 1.0, 0.01, 0.1, (2, 3, 4, 6, 8, 12, 16)
    scatter = dict(zip(grid, np.random.default_rng(1).normal(0, 0.02, len(grid)), strict=True))
    rows = [(g, 48, s, float(law_curve(g, a, b, c)) + scatter[g]) for g in grid for s in range(2)]
    r = regret(rows, 8, 4, "gap")
    x = np.array([[1.0, g, 1 / (g - 1)] for g, *_ in rows])
    y = np.array([row[3] for row in rows])
    resid = y - x @ np.linalg.lstsq(x, y, rcond=None)[0]
    d = np.array([0.0, 8 - 4, 1 / 7 - 1 / 3])
    half = 1.96 * np.sqrt(resid @ resid / (len(rows) - 3) * d @ np.linalg.inv(x.T @ x) @ d)
    assert half > 0.005 and r.ci95 == pytest.approx([r.value - half, r.value + half], rel=1e-9)  # the seeds add none


def _probe(g_star, lo, hi, reward_mean=0.3):
    return {"g_star": g_star, "g_star_ci95": [lo, hi], "reward_mean": reward_mean, "samples": 128}


def _halving(rows):
    return {"rows": rows, "rungs": [{"length": 5, "group_sizes": [2, 3, 4, 6, 8, 12, 16], "means": {}}], "best": 4}


def test_combine_takes_the_hull_of_the_pieces_and_says_g_matters():
    s = spec(BANDIT, group_sizes=[2, 3, 4, 6, 8, 12, 16], samples_per_step=[48], measure={"kind": "gradient_mse"})
    plan = plan_answer(s, 20_000)
    a, b, c = 0.0, 0.01, 0.09  # G* = 1 + sqrt(9) = 4
    out = combine(s, plan, _probe(4.1, 3.9, 4.3), None, _halving(_law_rows(a, b, c, 0.001)), 9000, 1.0)
    pieces = [p["ci95"] for p in out["interval_pieces"]]
    assert len(pieces) == 2 and out["g_star_ci95"] == [min(p[0] for p in pieces), max(p[1] for p in pieces)]
    assert out["g_star"] == 4.1 and out["recommended_group_size"] == 4 and 4 in out["tie_set"]
    assert out["g_matters"] is True and "G matters here" in out["message"]
    assert out["regret_g8"]["value"] > 0 and out["regret_g8"]["versus"] == 4
    assert out["passrate"] == {"p": 0.3, "epsilon": 0.05, "group_size": 12}  # 1 / (8 x 0.05 x 0.21) = 11.9
    assert out["cost"]["completions"] == 9000 and out["cost"]["fraction_of_grid"] == 9000 / plan.grid


def test_the_answer_keeps_the_users_g_unless_the_move_measurably_pays():
    """answer.baseline_group_size: move only when metric(baseline) - metric(recommended) on the first rung's law curve
    has a 95% interval above 0; else keep, saying why (THEORY.md "Keep or move")."""
    a, b, c = 0.0, 0.01, 0.09  # G* = 4; gap(8) - gap(4) = 0.04 - 0.09 (1/3 - 1/7) = 0.0229
    s = spec(BANDIT, group_sizes=[2, 3, 4, 6, 8, 12, 16], samples_per_step=[48], measure={"kind": "gradient_mse"})
    plan = plan_answer(s, 20_000)
    moved = combine(s, plan, _probe(4.1, 3.9, 4.3), None, _halving(_law_rows(a, b, c, 0.001)), 9000, 1.0)["baseline"]
    assert moved["action"] == "move" and moved["group_size"] == 8 and moved["use_group_size"] == 4
    assert moved["gain"]["value"] == pytest.approx(0.0229, abs=0.003) and moved["gain"]["ci95"][0] > 0
    assert moved["reason"].startswith("move to G = 4: it pays (grad_mse +0.02")
    noisy = _law_rows(a, b, c, 0.05)  # gap(6) - gap(4) = 0.0080: hidden in this noise
    six = spec({**s.model_dump(mode="json"), "answer": {"baseline_group_size": 6}})
    kept = combine(six, plan, _probe(4.1, 3.9, 4.3), None, _halving(noisy), 9000, 1.0)["baseline"]
    assert kept["action"] == "keep" and kept["use_group_size"] == 6 and kept["gain"]["ci95"][0] <= 0
    assert kept["reason"].startswith("keep G = 6: at this budget no G is measurably better")
    four = spec({**s.model_dump(mode="json"), "answer": {"baseline_group_size": 4}})
    same = combine(four, plan, _probe(4.1, 3.9, 4.3), None, _halving(_law_rows(a, b, c, 0.001)), 9000, 1.0)["baseline"]
    assert same["action"] == "keep" and same["reason"] == "G = 4 is the answer's G"
    # the probe alone: nothing measured; gradient_mse does not train, so its interval [3.9, 4.3] is G* at T, and the
    # law puts G = 4 below 8 for every G* in it (sweeps.answer.baseline): a modelled move
    alone = combine(s, plan, _probe(4.1, 3.9, 4.3), None, None, 500, 1.0)["baseline"]
    assert alone["action"] == "move" and alone["use_group_size"] == 4 and alone["gain"]["value"] is None
    assert alone["reason"].startswith("move to G = 4: for every G* in its 95% interval [3.9, 4.3] at T the law puts")
    # an outcome spec read at the start (staged): the probe's interval is G* at step 0, not at T: keep
    arith = spec(ARITH)
    start = combine(arith, plan_answer(arith, 3000), _probe(4.1, 3.9, 4.3), None, None, 500, 1.0)["baseline"]
    assert start["action"] == "keep" and "whether G = 4 does better is not measured at this budget" in start["reason"]


def test_g_barely_matters_only_where_the_data_bound_the_spread_within_a_tenth_of_the_scale():
    """THEORY.md "When G barely matters": False needs the 95% bound U of the law curve's spread over the grid at most
    0.1 of the metric's scale (gradient_mse: its level, 1.0 here). Flat rows with seed noise 0.03 bound it at 0.078:
    False; with noise 0.05 the F-test still sees nothing, but U = 0.13 (0.093 of it above the best G, 0.037 below):
    the budget could not tell, None."""
    s = spec(BANDIT, group_sizes=[2, 3, 4, 6, 8, 12, 16], samples_per_step=[48])
    plan = plan_answer(s, 20_000)
    tight = combine(s, plan, _probe(4.1, 3.9, 4.3), None, _halving(_law_rows(1.0, 0.0, 0.0, 0.03)), 9000, 1.0)
    assert tight["g_matters"] is False and tight["evidence"] == "none"
    assert "G barely matters here: every G from 2 to 16 is within 0.0" in tight["message"]
    assert "any G in the grid does about as well" in tight["message"]
    noisy = combine(s, plan, _probe(4.1, 3.9, 4.3), None, _halving(_law_rows(1.0, 0.0, 0.0, 0.05)), 9000, 1.0)
    assert noisy["g_matters"] is None and "could not be told at this budget" in noisy["g_matters_reason"]
    assert "the data bound it at 0.13 (95%), more than 0.0991 (10% of grad_mse's level)" in noisy["g_matters_reason"]


def test_the_scale_of_barely_mattering_is_how_far_training_moved_the_metric():
    """With the trials' metric at step 0 (``initial``) the scale is |mean at the rung - initial|: the same spread
    (U = 0.078) is within 0.1 of a move of 1.0 but not of a move of 0.2."""
    s = spec(BANDIT, group_sizes=[2, 3, 4, 6, 8, 12, 16], samples_per_step=[48])
    plan = plan_answer(s, 20_000)
    rows = _law_rows(1.0, 0.0, 0.0, 0.03)
    far = combine(s, plan, _probe(4.1, 3.9, 4.3), None, {**_halving(rows), "initial": 2.0}, 9000, 1.0)
    near = combine(s, plan, _probe(4.1, 3.9, 4.3), None, {**_halving(rows), "initial": 1.2}, 9000, 1.0)
    assert far["g_matters"] is False and "10% of how far training moved grad_mse" in far["g_matters_reason"]
    assert near["g_matters"] is None and "more than 0.0205 (10% of how far training moved grad_mse)" in near["g_matters_reason"]


def test_combine_without_any_interior_estimate_says_so():
    s = spec(BANDIT)
    out = combine(s, plan_answer(s, 200), {"g_star": None, "g_star_ci95": [None, None], "samples": 128}, None, None, 128, 0.1)
    assert out["status"] == "no_estimate" and out["recommended_group_size"] is None and out["g_matters"] is None
    assert "no G* at this budget" in out["message"]
    probe_only = combine(s, plan_answer(s, 200), {"g_star": 4.0, "g_star_ci95": [3.5, 4.5], "samples": 128}, None, None, 128, 0.1)
    assert probe_only["g_matters"] is None and "was not measured" in probe_only["message"]
    assert probe_only["regret_g8"]["value"] is None and "no halving" in probe_only["regret_g8"]["reason"]
    assert all(v is None or math.isfinite(v) for v in (out["g_star"],))


@pytest.mark.parametrize(
    "ties, words",
    [
        ([4], "G = 4 is clearly best"),
        ([], "G = 4 is clearly best"),
        ([4, 2, 3], "anything from 2 to 4 is as good"),
        ([8, 4], "G = 4 and 8 are as good"),  # a sparse grid: "from 4 to 8" would promise 5, 6 and 7
        ([4, 8, 16], "G = 4, 8 and 16 are as good"),
    ],
)
def test_what_else_is_as_good_names_the_grids_tied_g_as_they_are(ties, words):
    from sweeps.verdict import as_good

    assert as_good(4, ties) == words


def test_stages_that_disagree_widen_the_interval_and_are_never_strong():
    s = spec(ARITH, group_sizes=[2, 3, 4, 6, 8, 12, 16], samples_per_step=[48], steps=20)
    plan = plan_answer(s, 40_000)
    rows = _law_rows(0.0, 0.01, 0.09, 0.001)  # the first rung: G* = 4, clear
    agree = combine(s, plan, _probe(4.1, 3.9, 4.3), {"steps": 5, "probe_g_star": 4.2}, _halving(rows), 9000, 1.0)
    moved = combine(s, plan, _probe(4.1, 3.9, 4.3), {"steps": 5, "probe_g_star": 12.0}, _halving(rows), 9000, 1.0)
    assert agree["evidence"] == "strong"
    assert moved["evidence"] == "weak" and "the stages disagree" in moved["evidence_reason"]
    assert moved["g_star_ci95"][1] >= 12.0 and moved["recommended_group_size"] == 4  # staged: G* is the start probe's
    followed = combine(s, plan, _probe(4.1, 3.9, 4.3), {"steps": 15, "probes": {5: 6.0, 10: 8.0, 15: 10.5}}, None, 9000, 1.0,
                       method="tracking", follow=True)  # fmt: skip
    assert followed["g_star"] > 10.5 and followed["recommended_group_size"] >= 12  # read at T = 20, past the pilot
    assert followed["evidence"] == "weak" and followed["stages"]["drift"]["moves"]


def test_an_interval_open_above_is_kept_as_a_lower_bound_with_the_largest_g():
    s = spec(BANDIT, group_sizes=[2, 3, 4, 6, 8, 12, 16, 24], samples_per_step=[48])
    out = combine(s, plan_answer(s, 2000), _probe(40.0, 18.5, None), None, None, 1000, 1.0)
    assert out["status"] == "boundary" and out["recommended_group_size"] == 24 and out["tie_set"] == [24]
    assert out["g_star_ci95"] == [18.5, None] and out["g_star_bound"] == {"side": "above", "value": 18.5, "group_size": 24}
    assert out["evidence"] == "weak" and "G* is at least 18.5" in out["message"]
    beyond = combine(s, plan_answer(s, 2000), {"g_star": None, "g_star_ci95": [31.0, None], "samples": 128}, None, None, 128, 1.0)
    assert beyond["recommended_group_size"] == 24 and beyond["g_star_bound"]["value"] == 31.0  # tau2 <= 0: at least lo
    inside = combine(s, plan_answer(s, 2000), _probe(10.0, 6.0, None), None, None, 1000, 1.0)
    assert inside["recommended_group_size"] == 12 and inside["g_star_bound"]["value"] == 6.0  # G* = 10: its G, not 24
    assert inside["tie_set"] == [6, 8, 12, 16, 24] and "its estimate picks G = 12" in inside["message"]


def test_a_first_rung_that_puts_g_star_below_the_grid_gives_its_smallest_g_and_an_upper_bound():
    s = spec(BANDIT, group_sizes=[2, 3, 4, 6, 8, 12, 16], samples_per_step=[48], measure={"kind": "gradient_mse"})
    rising = _law_rows(0.0, 0.05, 0.0, 0.001)  # c = 0: the gap only grows with G, so G* lies below the grid
    no_probe = {"g_star": None, "g_star_ci95": [None, None], "samples": 128}
    out = combine(s, plan_answer(s, 20_000), no_probe, None, _halving(rising), 9000, 1.0)
    assert out["recommended_group_size"] == 2 and out["g_star_bound"] == {"side": "below", "value": 2.0, "group_size": 2}
    assert out["status"] == "boundary" and out["g_star_ci95"] == [1.0, 2.0]


def _filtered(g_star, ci, beats_base):
    """A probe's ``filtered`` block (workers.probe.filtered) on the grid 2..16 with the share of resamples in which
    G = g_star's filtered MSE is below G = 8's."""
    gs = [2, 3, 4, 6, 8, 12, 16]
    beats = {str(r): {str(b): 0.5 for b in gs} for r in gs}
    beats[str(g_star)]["8"] = beats_base
    share = [0.4, 0.55, 0.65, 0.78, 0.88, 0.95, 0.98]  # q(G): a step at G = 2 samples 0.88 / 0.4 = 2.2x G = 8's
    return {"group_sizes": gs, "g_star": g_star, "g_star_ci95": ci, "beats": beats, "informative_share": share}


def test_under_dynamic_sampling_the_answer_is_the_probes_filtered_law_not_the_unfiltered_g_star():
    """The unfiltered probe and pilot say G* = 4.1 [3.9, 4.3]; the filtered law at fixed trained B says 2 in every
    resample: the answer is G = 2 with G* at most 2 (no 'extend the grid': no G lies below 2), and moves from 8 when
    at least 97.5% of resamples put 2 below 8; a filtered best of 3 [2, 4] is an interval, kept at 0.9."""
    ds = spec(ARITH, grpo={"dynamic_sampling": {"max_batches": 4}})
    plan = plan_answer(ds, 3000)
    probe = {**_probe(4.1, 3.9, 4.3), "filtered": _filtered(2, [2, 2], 1.0)}
    pilot = {"group_size": 8, "steps": 10, "probes": {10: 4.2}, "probe_g_star": 4.2, "probe_prompts": 16}
    out = combine(ds, plan, probe, pilot, None, 500, 1.0, follow=True)
    assert out["recommended_group_size"] == 2 and out["g_star_ci95"] == [1.0, 2.0]
    assert out["g_star_bound"]["side"] == "below" and [p["source"] for p in out["interval_pieces"]] == [
        "probe's filtered law at the start (B trained a step) (G* below the grid)"
    ]
    assert out["baseline"]["action"] == "move" and out["baseline"]["use_group_size"] == 2
    assert out["baseline"]["reason"].endswith("(a step at G = 2 samples about 2.2x the completions of one at G = 8 to fill B)")
    assert "extend the grid" not in out["message"]
    probe["filtered"] = _filtered(3, [2, 4], 0.9)
    out = combine(ds, plan, probe, pilot, None, 500, 1.0, follow=True)
    assert out["recommended_group_size"] == 3 and out["g_star_ci95"] == [2.0, 4.0] and out["g_star_bound"] is None
    assert out["baseline"]["action"] == "keep" and out["baseline"]["use_group_size"] == 8
    # without dynamic sampling the same probe's filtered block is not there and the unfiltered G* answers
    plain = combine(spec(ARITH), plan_answer(spec(ARITH), 3000), _probe(4.1, 3.9, 4.3), None, None, 500, 1.0)
    assert plain["recommended_group_size"] == 4

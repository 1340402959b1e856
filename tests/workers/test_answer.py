"""workers.answers on the real worker code: it covers a bandit's exact G*, says so when G does not matter, and never
samples more completions than its budget (counted at the policies' sample calls, not by its own bookkeeping)."""

import pytest

from sweeps.answer import METHODS
from sweeps.spec import SweepSpec, load_spec
from workers.answers import RUNNERS
from workers.answers import run_answer as run_typed
from workers.answers.stages import StepClock
from workers.models.lm import LMPolicy
from workers.models.tabular import TabularPolicy

EXAMPLES = "sweeps/examples"


def run_answer(spec: SweepSpec, cache, budget: int | None = None, method: str | None = None) -> dict:
    """The answer as JSON (what the CLI and the API serve), of ``method`` when given."""
    if method is not None:
        spec = spec.model_copy(update={"answer": spec.answer.model_copy(update={"method": method})})
    return run_typed(spec, cache, budget).model_dump(mode="json")


def test_every_registered_method_has_a_runner():
    assert set(RUNNERS) == set(METHODS)


BANDIT_G_STAR = 4.205  # THEORY.md's check instance


@pytest.fixture
def sampled(monkeypatch):
    """Completions the policies sample (rollouts, evals, probes), counted as they are drawn."""
    count = {"n": 0}
    for cls in (TabularPolicy, LMPolicy):
        original = cls.sample

        def counting(self, prompts, *args, _original=original, **kwargs):
            count["n"] += len(prompts)  # one completion per prompt entry (groups come expanded; group_size is a hint)
            return _original(self, prompts, *args, **kwargs)

        monkeypatch.setattr(cls, "sample", counting)
    return count


def test_it_covers_the_bandit_check_instance_within_its_default_budget(tmp_path, sampled):
    spec = load_spec(f"{EXAMPLES}/bandit-law.yaml")
    out = run_answer(spec, tmp_path)
    lo, hi = out["g_star_ci95"]
    assert lo <= BANDIT_G_STAR <= hi and out["recommended_group_size"] == 4
    assert out["g_matters"] is True and out["evidence"] in ("strong", "weak")
    assert 0 < sampled["n"] <= out["cost"]["completions"] <= out["cost"]["budget"]
    assert out["cost"]["budget"] == round(0.01 * out["cost"]["grid_completions"])  # 1% of the grid by default
    assert out["regret_g8"]["value"] > 0  # G = 8 has a larger gradient MSE than G = 4 here
    per_prompt = out["per_prompt"]  # the start probe's: the bandit's exact per-context ratio is 0.993
    assert per_prompt == out["stages"]["probe"]["per_prompt"] and per_prompt["mse_ratio"] == pytest.approx(0.993, rel=0.10)


def test_it_says_g_barely_matters_where_the_grid_sits_at_the_bottom_of_the_law(tmp_path):
    """THEORY.md "When G barely matters": the bandit's gradient MSE over G 3..6 spans 4.4% of its level (L(3), L(4),
    L(5), L(6) = 0.280, 0.269, 0.271, 0.279); a rung of 412 draws bounds that spread below 10%: False (over G 2..16
    it spans 57%: the check instance's answer above says True)."""
    spec = SweepSpec.model_validate(
        {
            "name": "flat",
            "task": {"name": "bandit"},
            "model": {"preset": "tabular"},
            "group_sizes": [3, 4, 5, 6],
            "samples_per_step": [60],
            "seeds": [0, 1, 2, 3, 4],
            "measure": {"kind": "gradient_mse", "repeats": 1000},
        }
    )
    out = run_answer(spec, tmp_path, budget=400_000)
    assert out["stages"]["plan"]["halving"]["lengths"][0] >= 0.25 * 1000  # long enough to tell (MATTERS_MIN_SHARE)
    assert out["g_matters"] is False and out["evidence"] == "none"
    assert "G barely matters here: every G from 3 to 6 is within" in out["message"]


def test_it_does_not_say_g_barely_matters_where_training_went_nowhere_or_the_rung_was_short(tmp_path):
    # lr 1e-9: the policy does not move, so every G ends at the same exact held-out gap, and at its step-0 value
    spec = SweepSpec.model_validate(
        {
            "name": "still",
            "task": {"name": "bandit"},
            "model": {"preset": "tabular"},
            "group_sizes": [2, 4, 8, 16],
            "samples_per_step": [32],
            "seeds": [0, 1, 2, 3, 4],
            "steps": 40,
            "grpo": {"advantage": "loo", "lr": 1e-9},
            "eval": {"prompts": 20},
        }
    )
    out = run_answer(spec, tmp_path, budget=16000)
    assert out["stages"]["plan"]["halving"]["lengths"][0] >= 0.25 * spec.steps
    assert out["g_matters"] is None and "training did not move gap" in out["g_matters_reason"]
    short = run_answer(spec, tmp_path, budget=4000)  # a rung of a few steps sees no difference, and says only that
    assert short["stages"]["plan"]["halving"]["lengths"][0] < 0.25 * spec.steps
    assert short["g_matters"] is None and short["evidence"] == "weak"
    assert "not seen yet at this budget" in short["g_matters_reason"] and "barely" not in short["message"].split(";")[0]


@pytest.mark.parametrize("method, dynamic", [("staged", False), ("tracking", True)])
def test_it_never_samples_more_than_its_budget(tmp_path, sampled, method, dynamic):
    """Within the budget and counted exactly; under dynamic sampling (the tracking run here) the steps sample again
    past the plan's B a step, and the answer's cost counts those completions too (workers.answers.stages)."""
    assert set(METHODS) == {"staged", "tracking"}  # a new method joins the parameters
    spec = SweepSpec.model_validate(
        {
            "name": "arith",
            "task": {"name": "arithmetic", "max_operand": 19},
            "model": {"preset": "tiny-llama"},
            "group_sizes": [2, 4, 8, 16],
            "samples_per_step": [16],
            "seeds": [0, 1, 2],
            "steps": 40,
            "eval": {"prompts": 64},
            "grpo": {"dynamic_sampling": {"max_batches": 4}} if dynamic else {},
        }
    )
    budget = 3000
    out = run_answer(spec, tmp_path, budget=budget, method=method)
    plan = out["stages"]["plan"]
    assert out["method"] == method
    assert plan["pilot"] is not None and plan["halving"] is not None  # every stage ran
    rungs = 2 if method == "staged" else 1  # tracking gives its pilot most of the budget: one rung here
    assert len(out["stages"]["halving"]["rungs"]) == len(plan["halving"]["lengths"]) >= rungs
    assert sampled["n"] == out["cost"]["completions"]  # its bookkeeping is exact
    if dynamic:  # silent groups were sampled again, beyond what the plan counts, and they are in the cost
        stages = out["stages"]
        assert stages["pilot"]["resampled"] > 0 and stages["halving"]["resampled"] > 0, stages
    else:
        assert out["cost"]["completions"] <= budget
    cost = out["cost"]  # and in seconds: the probe's part, and the grid priced at the answer's own step times (at
    # a budget of a quarter of this small grid the answer's set-up can make it the longer: no order between the two)
    assert 0 < cost["probe_seconds"] < cost["seconds"] and cost["grid_seconds"] > 0
    assert cost["fraction_of_grid_seconds"] == pytest.approx(cost["seconds"] / cost["grid_seconds"])


def test_the_step_clock_counts_a_generation_once_and_leaves_evals_out():
    """Steps of a generation of k = 2 report its sampling once (workers.batch); a step without an update (an eval's or
    a probe's report) adds nothing."""
    clock = StepClock()
    for metrics in (
        {"time_generate_s": 2.0, "time_score_s": 0.5, "time_update_s": 1.0},
        {"time_generate_s": 0.0, "time_score_s": 0.0, "time_update_s": 1.0},
        {"eval_accuracy": 0.5, "probe_tau2": 1.0},
    ):
        clock(metrics, 1)
    assert (clock.train_s, clock.generate_s) == (4.5, 2.0)

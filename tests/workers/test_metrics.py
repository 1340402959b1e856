"""sweeps.metrics is the registry of what a trial logs: a real trial reports nothing it does not list."""

from sweeps import metrics
from sweeps.spec import SweepSpec
from sweeps.trial import TrialConfig
from workers.entry import run_measure


def _keys(spec: dict, tmp_path) -> set[str]:
    spec = SweepSpec.model_validate({"name": "m", "seeds": [0], **spec})
    seen: set[str] = set()
    cfg = TrialConfig.for_trial(spec, spec.group_sizes[0], spec.samples_per_step[0], 0, tmp_path)
    result = run_measure(cfg, lambda m, step: seen.update(m))
    return seen | set(result.metrics)


def test_every_metric_a_trial_reports_is_registered(tmp_path):
    outcome = {
        "task": {"name": "arithmetic", "max_operand": 9},
        "model": {"preset": "tiny-llama"},
        "group_sizes": [4],
        "samples_per_step": [16],
        "steps": 4,
        "eval": {"prompts": 16, "every": 2},
        "probe": {"prompts": 4, "completions": 4, "every": 2},
    }
    mse = {"task": {"name": "bandit"}, "model": {"preset": "tabular"}, "group_sizes": [4], "samples_per_step": [16],
           "steps": 1, "measure": {"kind": "gradient_mse", "repeats": 4}}  # fmt: skip
    keys = _keys(outcome, tmp_path) | _keys(mse, tmp_path)
    assert {"reward_mean", "gap", "gap@2", "probe_g_star", "grad_mse"} <= keys  # both measures ran their course
    assert set(metrics.SUMMARIZED) <= keys  # the realized G, the no-signal causes and truncation: every step
    assert [k for k in keys if not metrics.known(k)] == []


def test_unknown_names_are_not_registered():
    assert not metrics.known("rewardmean") and not metrics.known("gap_extra")
    assert metrics.known("gap_initial") and metrics.known("gap_se@50") and metrics.known("reward/rewards.accuracy")


def test_what_is_constant_by_construction_follows_each_setting():
    """flat_by_construction: each metric is left out only under the settings that make it constant."""
    from sweeps.spec import GRPOSpec

    def flat(tabular: bool = False, **grpo) -> set[str]:
        return set(metrics.flat_by_construction(GRPOSpec(**grpo), tabular))

    clip = {"clip_frac_low", "clip_frac_high", "momentum_overshoot_frac"}
    assert flat() == clip | {"loss", "kl"}
    assert flat(inner_steps=2) == {"kl"}  # the ratio moves after the first inner step
    assert flat(kl_beta=0.1) == clip  # a KL term: kl moves, and the loss holds it
    assert flat(advantage="oracle") == clip | {"kl"}  # r - V(x) does not sum to 0 in a group
    assert flat(loss_aggregation="token_mean") == flat(loss_aggregation="seq_mean_token_sum_norm") == clip | {"kl"}
    assert flat(tabular=True) == clip | {"loss", "kl", "completion_tokens_mean", "truncation_rate"}
    assert set(metrics.flat_by_construction(GRPOSpec())) <= set(metrics.STEP)  # names the registry knows


def test_a_results_metrics_are_the_final_the_initial_and_the_checkpoints_gap():
    at = {4: {"gap": 0.5, "gap_se": 0.1}, 8: {"gap": 0.4, "eval_accuracy": 0.6}}
    out = metrics.result_metrics({"gap": 0.3}, {"gap": 0.7, "eval_accuracy": 0.3}, at)
    assert out == {"gap": 0.3, "gap_initial": 0.7, "eval_accuracy_initial": 0.3, "gap@4": 0.5, "gap_se@4": 0.1, "gap@8": 0.4}


def test_a_results_summary_is_the_min_the_max_and_the_mean_over_the_steps_that_have_each():
    summary: dict = {}
    metrics.summarize(summary, {"realized_group_size_min": 4, "realized_group_size_max": 4, "truncation_rate": 0.5})
    metrics.summarize(summary, {"realized_group_size_min": 3, "realized_group_size_max": 5, "truncation_rate": 0.0})
    metrics.summarize(summary, {"frac_groups_all_wrong": 0.25, "loss": 1.0})  # a step without the others
    assert metrics.summary_metrics(summary) == {
        "realized_group_size_min": 3,
        "realized_group_size_max": 5,
        "truncation_rate": 0.25,
        "frac_groups_all_wrong": 0.25,
    }
    assert summary["truncation_rate"] == [2, 0.5]  # plain lists: a checkpoint holds them
    assert all(metrics.known(k) for k in metrics.SUMMARIZED) and metrics.summary_metrics({}) == {}

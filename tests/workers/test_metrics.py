"""workers.metrics is the registry of what a trial logs: a real trial reports nothing it does not list."""

from sweeps.planner import TrialPlan
from sweeps.spec import SweepSpec
from workers import metrics
from workers.config import TrialConfig
from workers.entry import run_measure


def _keys(spec: dict, tmp_path) -> set[str]:
    spec = SweepSpec.model_validate({"name": "m", "seeds": [0], **spec})
    seen: set[str] = set()
    cfg = TrialConfig.from_spec(spec, TrialPlan(spec.group_sizes[0], spec.samples_per_step[0], 0), tmp_path)
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
    assert [k for k in keys if not metrics.known(k)] == []


def test_unknown_names_are_not_registered():
    assert not metrics.known("rewardmean") and not metrics.known("gap_extra")
    assert metrics.known("gap_initial") and metrics.known("gap_se@50") and metrics.known("reward/rewards.accuracy")

"""``engine: trl``: trials trained by TRL's own GRPOTrainer on chat-tiny, in a thread as on a warm Ray worker, measured as
every trial is (TRL's per-step metrics under TRL's names, groupscale's held-out gap, checkpoints and resume, LoRA)."""

import dataclasses
import json
import threading
from pathlib import Path

import numpy as np
import pytest

from sweeps.engines.trl import coerce
from sweeps.metrics import SUMMARIZED
from sweeps.spec import SweepSpec
from sweeps.trial import TrialConfig, TrialResult
from tests.user_material import REWARDS, word_problem_rows, write_parquet
from workers.engines.trl import silent_generation, trained_settings, trl_arguments
from workers.measures import trainer
from workers.models.presets import preset_path

TRL_NAMES = (
    "reward",
    "reward_std",
    "frac_reward_zero_std",
    "completions/mean_length",
    "entropy",
    "loss",
    "grad_norm",
    "learning_rate",
    "clip_ratio/low_mean",
    "step_time",
)
RECIPE = {"learning_rate": "3e-4", "max_completion_length": 24, "beta": 0.0, "loss_type": "dapo", "lr_scheduler_type": "constant"}


class Recorder:
    def __init__(self, die_at: int | None = None, checkpoints: Path | None = None) -> None:
        self.steps: dict[int, dict[str, float]] = {}
        self.table: list[dict] = []
        self.die_at = die_at
        self.checkpoints = checkpoints  # a trial's output_dir: its checkpoint-N folders are listed at each step's first point
        self.on_disk: dict[int, list[str]] = {}

    def __call__(self, metrics: dict[str, float], step: int) -> None:
        if self.checkpoints is not None and step not in self.on_disk:
            self.on_disk[step] = sorted(p.name for p in self.checkpoints.glob("checkpoint-*"))
        if self.die_at is not None and step == self.die_at and "loss" in metrics:
            raise KeyboardInterrupt  # a worker killed mid-trial (nothing in the trainer catches it)
        self.steps.setdefault(step, {}).update(metrics)

    def log_table(self, rows: list[dict]) -> None:
        self.table = rows

    def flush(self) -> None:
        self.flushed = max(self.steps)


def _run(cfg: TrialConfig, report: Recorder) -> TrialResult | BaseException:
    """The trial's engine's own trainer (workers.measures.trainer), in a thread as a worker runs it; its exception
    returned."""
    out: list = []

    def target() -> None:
        try:
            out.append(trainer(cfg.engine)(cfg, report))
        except BaseException as e:  # noqa: BLE001 - handed to the test
            out.append(e)

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    return out[0]


@pytest.fixture(scope="module")
def chat(model_cache, tmp_path_factory):
    data = write_parquet(word_problem_rows(60), tmp_path_factory.mktemp("data") / "train.parquet")
    return preset_path("chat-tiny", None, model_cache), data


def _config(chat, tmp_path, **over) -> TrialConfig:
    folder, data = chat
    base = dict(
        task={
            "name": "dataset",
            "path": str(data),
            "rewards": [
                {"function": f"{REWARDS / 'mathpkg/rewards/accuracy.py'}:accuracy_reward"},
                {"name": "numeric_match", "answer_column": "solution", "weight": 0.5},
            ],
        },
        model={"path": str(folder)},
        group_size=2,
        samples_per_step=8,
        seed=0,
        steps=4,
        eval_prompts=8,
        eval_samples_per_prompt=2,
        cache_dir=str(tmp_path),
        engine="trl",
        trl=RECIPE,
        max_new_tokens=24,
    )
    return TrialConfig.flat(**{**base, **over})


def test_the_recipe_reaches_trl_unchanged_but_for_what_a_sweep_sets(tmp_path):
    recipe = {
        **RECIPE,
        "num_generations": 14,
        "per_device_train_batch_size": 4,
        "gradient_accumulation_steps": 2,
        "steps_per_generation": 4,
        "max_steps": 500,
        "report_to": "wandb",
        "weight_decay": "0.1",
        "bf16": "true",
    }
    arithmetic = {"task": {"name": "arithmetic"}, "model": {"preset": "tiny-llama"}}
    cfg = _config(("unused", "unused"), tmp_path, **arithmetic, group_size=4, samples_per_step=32, seed=3, steps=7, trl=recipe)
    args = trl_arguments(cfg)
    assert (
        args["learning_rate"] == 3e-4 and args["weight_decay"] == 0.1 and args["loss_type"] == "dapo"
    )  # strings read as TRL reads them
    assert (args["num_generations"], args["generation_batch_size"], args["max_steps"], args["seed"]) == (4, 32, 7, 3)
    assert args["report_to"] == "none" and args["logging_steps"] == 1 and "steps_per_generation" not in args
    # the recipe's 2 optimizer steps per generation (steps_per_generation 4 / accumulation 2), each of 32 / 2 completions
    assert args["per_device_train_batch_size"] * args["gradient_accumulation_steps"] == 16
    assert args["use_cpu"] is True and args["bf16"] is False  # a CPU trial
    from trl import GRPOConfig

    trl = GRPOConfig(**args)
    assert trl.steps_per_generation // trl.gradient_accumulation_steps == 2 and trl.generation_batch_size == 32
    bare = GRPOConfig(**trl_arguments(_config(("unused", "unused"), tmp_path, **arithmetic, trl={})))
    default = {f.name: f.default for f in dataclasses.fields(GRPOConfig)}
    assert (bare.max_completion_length, bare.temperature) == (default["max_completion_length"], default["temperature"])
    # the held-out gap samples as TRL trains: with its defaults when the recipe sets none (it sampled 256 tokens, not 512)
    spec = SweepSpec.model_validate({"name": "s", **arithmetic, "engine": "trl", "group_sizes": [2], "samples_per_step": [8]})
    eval_sampling = TrialConfig.first_of(spec, str(tmp_path)).grpo
    assert (eval_sampling.max_new_tokens, eval_sampling.temperature) == (default["max_completion_length"], default["temperature"])
    shown = trained_settings(trl, recipe)  # the run's params: what TRL ran, not groupscale's grpo defaults
    assert shown["trl.max_completion_length"] == "24" and shown["trl.weight_decay"] == "0.1"
    assert shown["trl.num_generations"] == "4" and shown["trl.learning_rate"] == "0.0003"
    with pytest.raises(ValueError, match=r"trl.learnig_rate: not a field of TRL's GRPOConfig \(did you mean learning_rate"):
        coerce({"learnig_rate": 1e-6})
    with pytest.raises(ValueError, match=r"trl.beta: 'a lot' is not a float"):
        coerce({"beta": "a lot"})


def test_a_trl_trial_logs_trls_metrics_and_groupscales_gap(chat, tmp_path):
    report = Recorder()
    result = _run(_config(chat, tmp_path, eval_every=2), report)
    assert isinstance(result, TrialResult) and result.status == "succeeded", result
    for step in range(1, 5):
        assert all(name in report.steps[step] for name in TRL_NAMES), sorted(report.steps[step])
        assert (
            "rewards/accuracy.accuracy_reward/mean" in report.steps[step] and "rewards/numeric_match/mean" in report.steps[step]
        )
        groups = report.steps[step]  # the generation's groups (TrlRewards.check_generation), under the groupscale names
        assert groups["realized_group_size_min"] == groups["realized_group_size_max"] == 2.0, groups
        assert groups["truncation_rate"] == groups["completions/clipped_ratio"]
        causes = [groups[k] for k in ("frac_groups_identical", "frac_groups_all_wrong", "frac_groups_all_right")]
        assert all(0.0 <= c <= 1.0 for c in causes) and sum(causes) <= groups["frac_reward_zero_std"] + 1e-9
    assert result.metrics["realized_group_size_min"] == result.metrics["realized_group_size_max"] == 2.0
    mean = sum(report.steps[s]["truncation_rate"] for s in range(1, 5)) / 4  # the result keeps the steps' mean
    assert result.metrics["truncation_rate"] == pytest.approx(mean)
    assert {"gap", "gap_se", "eval_accuracy"} <= set(report.steps[2]) and {"gap", "eval_accuracy"} <= set(report.steps[4])
    assert {"gap", "eval_accuracy", "parameters_total"} <= set(report.steps[0])  # the gap's chart starts at step 0
    assert result.metrics["gap"] == report.steps[4]["gap"] and result.metrics["gap_initial"] == report.steps[0]["gap"]
    assert result.metrics["gap@2"] == report.steps[2]["gap"] and "gap@4" not in result.metrics  # by_step's data
    assert report.table and {"prompt", "completion", "reward"} <= set(report.table[0])
    # the same eval as the groupscale engine: the initial gap of the two engines is the same number
    from workers.engines.groupscale import train_trial

    same = Recorder()
    train_trial(_config(chat, tmp_path, engine="groupscale", trl={}, steps=1), same)
    assert same.steps[0]["gap"] == report.steps[0]["gap"]


def test_a_killed_trl_trial_resumes_from_trls_last_checkpoint(chat, tmp_path):
    straight = _run(_config(chat, tmp_path / "a"), Recorder())
    cfg = _config(chat, tmp_path / "b", checkpoint_every=2, checkpoint_dir=str(tmp_path / "ckpt"))
    killed_report = Recorder(die_at=3)
    killed = _run(cfg, killed_report)
    assert isinstance(killed, KeyboardInterrupt)
    assert sorted(p.name for p in Path(cfg.checkpoint_dir).glob("checkpoint-*")) == ["checkpoint-2"]
    assert killed_report.flushed == 2  # step 2's points were flushed before TRL wrote checkpoint-2
    saved = json.loads((Path(cfg.checkpoint_dir) / "checkpoint-2" / "trainer_state.json").read_text())
    assert saved["stateful_callbacks"]["TrialState"]["attributes"]["summary"]["realized_group_size_min"] == [2, 2.0]
    report = Recorder()
    resumed = _run(cfg, report)
    assert resumed.status == "succeeded" and min(report.steps) == 2 and report.steps[2] == {"resumed_from_step": 2.0}
    assert sorted(s for s in report.steps if "loss" in report.steps[s]) == [3, 4]  # no step trained twice
    assert resumed.metrics["gap_initial"] == straight.metrics["gap_initial"]  # kept beside the checkpoints
    # eval.every auto (T = 4: every step): gap@1 and gap@2 kept from before the kill, gap@3 evaluated again
    assert [resumed.metrics[f"gap@{s}"] for s in (1, 2, 3)] == [straight.metrics[f"gap@{s}"] for s in (1, 2, 3)]
    assert sorted(s for s in report.steps if "gap" in report.steps[s]) == [3, 4]
    assert resumed.metrics["gap"] == pytest.approx(straight.metrics["gap"], abs=1e-9), (resumed.metrics, straight.metrics)
    summary = {k: straight.metrics[k] for k in SUMMARIZED}  # over the 4 steps, 2 of them before the kill
    assert {k: resumed.metrics[k] for k in SUMMARIZED} == pytest.approx(summary, abs=1e-9)


def test_lora_in_the_trl_engine_trains_the_adapter_alone(chat, tmp_path):
    lora = {"r": 4, "alpha": 8.0, "dropout": 0.0, "target_modules": "all-linear"}
    folder, _ = chat
    report = Recorder()
    cfg = _config(
        chat, tmp_path, model={"path": str(folder), "lora": lora}, checkpoint_every=4, checkpoint_dir=str(tmp_path / "c")
    )
    result = _run(cfg, report)
    assert result.status == "succeeded", result
    counts = report.steps[0]
    assert 0 < counts["parameters_trainable"] < 0.2 * counts["parameters_total"]
    saved = Path(cfg.checkpoint_dir) / "checkpoint-4"
    assert (saved / "adapter_model.safetensors").is_file() and not (saved / "model.safetensors").exists()
    assert json.loads((saved / "adapter_config.json").read_text())["r"] == 4


def test_a_trl_exception_fails_the_trial_with_its_cause(tmp_path, model_cache):
    """A recipe TRL refuses when it builds its config (an unknown loss type) ends the trial failed, naming TRL's error."""
    cfg = _config(("unused", "unused"), tmp_path, task={"name": "arithmetic"}, model={"preset": "tiny-llama"},
                  cache_dir=str(model_cache), trl={**RECIPE, "loss_type": "no-such-loss"})  # fmt: skip
    result = _run(cfg, Recorder())
    assert result.status == "failed" and result.reason.startswith("TRL: ValueError:") and "no-such-loss" in result.reason


def test_a_trl_trial_whose_groups_are_cut_fails_naming_the_realized_g(chat, tmp_path, monkeypatch):
    """A generation that reaches the rewards a completion short (as a trainer that dropped one would hand it over)
    ends the TRL trial failed, naming the realized G and the step."""
    from workers.engines import trl as trl_engine

    real = trl_engine.realized_group_sizes
    monkeypatch.setattr(trl_engine, "realized_group_sizes", lambda rows, sizes: real(rows[:-1], sizes))
    result = _run(_config(chat, tmp_path, steps=2), Recorder())
    assert result.status == "failed", result
    assert result.reason == "realized group size 1 to 2 at step 1, configured G = 2 (the trainer dropped or merged completions)"


def test_a_trl_trial_keeps_only_its_last_checkpoint_whatever_the_recipe_says_and_resumes_from_it(chat, tmp_path):
    """TRL keeps every checkpoint-N (weights and optimizer state) unless told otherwise: a trial keeps the last complete
    one alone, with what resume needs (the optimizer too), whatever the recipe's save_* fields say (the sweep's win)."""
    straight = _run(_config(chat, tmp_path / "a", steps=6), Recorder())
    ckpt = tmp_path / "ckpt"
    recipe = {**RECIPE, "save_total_limit": 5, "save_only_model": True, "save_steps": 1, "save_strategy": "no"}
    cfg = _config(chat, tmp_path / "b", steps=6, checkpoint_every=2, checkpoint_dir=str(ckpt), trl=recipe)
    killed = Recorder(die_at=5, checkpoints=ckpt)
    assert isinstance(_run(cfg, killed), KeyboardInterrupt)
    # a step's first point comes after the previous step's save: after each save, only that checkpoint is on disk
    assert {s: killed.on_disk[s] for s in (2, 3, 4, 5)} == {
        2: [],
        3: ["checkpoint-2"],
        4: ["checkpoint-2"],
        5: ["checkpoint-4"],
    }, killed.on_disk
    kept = ckpt / "checkpoint-4"
    assert (kept / "optimizer.pt").is_file() and (kept / "trainer_state.json").is_file()
    # the checkpoint's size is the docs' formula: float32 weights plus AdamW's two float32 moments, 12 bytes a parameter
    size = (kept / "model.safetensors").stat().st_size + (kept / "optimizer.pt").stat().st_size
    assert size == pytest.approx(12 * killed.steps[0]["parameters_total"], rel=0.05), size
    report = Recorder(checkpoints=ckpt)
    resumed = _run(cfg, report)
    assert resumed.status == "succeeded" and report.steps[4] == {"resumed_from_step": 4.0}, resumed
    assert sorted(s for s in report.steps if "loss" in report.steps[s]) == [5, 6] and report.on_disk[6] == ["checkpoint-4"]
    assert sorted(p.name for p in ckpt.glob("checkpoint-*")) == ["checkpoint-6"]
    assert resumed.metrics["gap"] == pytest.approx(straight.metrics["gap"], abs=1e-9), (resumed.metrics, straight.metrics)


ZERO_REWARD = "def zero(completions, **kwargs):\n    return [0.0] * len(completions)\n"
# one generation feeds two optimizer steps: steps_per_generation twice the accumulation, or TRL's num_iterations mu = 2
REUSED = {
    "steps_per_generation": {"per_device_train_batch_size": 2, "gradient_accumulation_steps": 2, "steps_per_generation": 4},
    "num_iterations": {"num_iterations": 2},
}


@pytest.mark.parametrize("reuse", sorted(REUSED))
def test_a_trl_trial_without_signal_is_no_signal_when_each_generation_feeds_several_steps(chat, tmp_path, reuse):
    """The no-signal rule counts every generation once, however many optimizer steps reuse it (TRL logs
    frac_reward_zero_std only on the steps that generated); a trial with signal in the same set-up still succeeds."""
    (tmp_path / "zero.py").write_text(ZERO_REWARD)
    silent_task = {"name": "dataset", "path": str(chat[1]), "rewards": [{"function": f"{tmp_path / 'zero.py'}:zero"}]}
    trl = {**RECIPE, **REUSED[reuse]}
    report = Recorder()
    silent = _run(_config(chat, tmp_path / "a", task=silent_task, trl=trl), report)
    assert sorted(s for s in report.steps if "frac_reward_zero_std" in report.steps[s]) == [1, 3]  # TRL's own log
    assert silent.status == "no_signal", silent
    assert silent.reason == (
        "2/2 generations without signal; almost every completion failed (mean reward 0.000): task too hard for this model"
    )
    # why, kept in the result: every group all wrong (reward 0) or, before that, of one completion text
    assert silent.metrics["frac_groups_identical"] + silent.metrics["frac_groups_all_wrong"] == pytest.approx(1.0)
    assert silent.metrics["frac_groups_all_right"] == 0.0 and silent.metrics["realized_group_size_min"] == 2.0
    signal = _run(_config(chat, tmp_path / "b", trl=trl), Recorder())
    assert signal.status == "succeeded", signal


def test_a_recipe_with_several_generations_per_optimizer_step_trains_as_trl_trains_it(chat, tmp_path):
    """TRL's DeepSeekMath and Lite PPO recipes set steps_per_generation below the accumulation: here 2 against 4, so
    each optimizer step takes two generations of B = 4 completions; 2 steps make 4 generations, each counted once."""
    several = {**RECIPE, "per_device_train_batch_size": 2, "gradient_accumulation_steps": 4, "steps_per_generation": 2}
    (tmp_path / "zero.py").write_text(ZERO_REWARD)
    silent_task = {"name": "dataset", "path": str(chat[1]), "rewards": [{"function": f"{tmp_path / 'zero.py'}:zero"}]}
    cfg = _config(chat, tmp_path / "a", task=silent_task, trl=several, samples_per_step=4, steps=2)
    assert trl_arguments(cfg)["gradient_accumulation_steps"] == 4 and trl_arguments(cfg)["generation_batch_size"] == 4
    report = Recorder()
    silent = _run(cfg, report)
    assert silent.status == "no_signal" and silent.reason.startswith("4/4 generations without signal"), silent
    assert sorted(s for s in report.steps if "loss" in report.steps[s]) == [1, 2]
    signal = _run(_config(chat, tmp_path / "b", trl=several, samples_per_step=4, steps=2), Recorder())
    assert signal.status == "succeeded", signal


def test_a_resumed_trl_trial_counts_the_generations_made_before_it_was_killed(chat, tmp_path):
    """The count of generations with and without signal is part of TRL's checkpoint (the harness's TrialState in
    trainer_state.json, written last), so a killed trial resumes it; here 1 generation before the kill at step 3, 1
    after the resume."""
    (tmp_path / "zero.py").write_text(ZERO_REWARD)
    task = {"name": "dataset", "path": str(chat[1]), "rewards": [{"function": f"{tmp_path / 'zero.py'}:zero"}]}
    trl = {**RECIPE, **REUSED["steps_per_generation"]}
    cfg = _config(chat, tmp_path, task=task, trl=trl, checkpoint_every=2, checkpoint_dir=str(tmp_path / "ckpt"))
    assert isinstance(_run(cfg, Recorder(die_at=3)), KeyboardInterrupt)
    resumed = _run(cfg, Recorder())
    assert resumed.status == "no_signal" and resumed.reason.startswith("2/2 generations without signal"), resumed


def test_a_generation_is_silent_when_no_group_gives_an_advantage():
    """Hand-computed: two groups of G = 2; the terms a and b vary within each group but their sum does not."""
    a, b = np.array([1.0, 0.0, 0.5, 0.5]), np.array([0.0, 1.0, 0.5, 0.5])
    assert silent_generation([a, b], [1.0, 1.0], 2, "sum_then_normalize")  # a + b = 1 everywhere: every advantage 0
    assert not silent_generation([a, b], [1.0, 2.0], 2, "sum_then_normalize")  # a + 2b: 1, 2 in the first group
    assert not silent_generation([a, b], [1.0, 1.0], 2, "normalize_then_sum")  # each term normalized in its group
    assert silent_generation([np.array([0.3, 0.3, 0.0, 0.0])], [1.0], 2, "normalize_then_sum")
    assert silent_generation([np.array([np.nan, 0.0, 1.0, 1.0 + 1e-5])], [1.0], 2, "sum_then_normalize")  # abstained: 0
    assert not silent_generation([np.array([np.nan, 0.5, 1.0, 1.0])], [1.0], 2, "sum_then_normalize")


@pytest.mark.slow  # about a minute: five TRL trials
def test_answer_for_a_trl_recipe_trains_its_stages_with_trl_within_its_budget(chat, tmp_path, monkeypatch):
    """`groupscale answer` on an engine-trl spec: the pilot and every halving run are TRL trials on the recipe (the
    pilot probed as TRL trains), and what it samples, TRL's generations counted, stays within the budget."""
    from workers import answers as answers_module
    from workers.engines import trl as trl_engine

    calls: list[tuple[int, int]] = []
    train = trl_engine.train_trial_trl

    def counted(cfg, report=lambda m, s: None, placement=None):  # noqa: ANN001, ANN202 - train_trial_trl's own
        calls.append((cfg.group_size, cfg.steps))
        return train(cfg, report, placement)

    monkeypatch.setattr(trl_engine, "train_trial_trl", counted)
    from trl import GRPOConfig

    from sweeps.from_trl import spec_from_trl

    folder, _ = chat
    recipe = {**RECIPE, "model_name_or_path": str(folder), "per_device_train_batch_size": 8}
    fields = {f.name for f in dataclasses.fields(GRPOConfig)}
    made, _ = spec_from_trl(recipe, [2, 4], seeds=1, steps=8, grpo_fields=fields)  # `groupscale spec from-trl`'s
    assert made["engine"] == "trl" and made["samples_per_step"] == [8]
    task = _config(chat, tmp_path).task  # the user fills in task.path and task.rewards
    spec = SweepSpec.model_validate(
        {**made, "task": task, "eval": {"prompts": 8, "samples_per_prompt": 2}, "answer": {"budget": 1500}}
    )
    answer = answers_module.run_answer(spec, str(tmp_path))
    assert calls and answer.cost.completions <= 1500, (calls, answer.cost)
    assert answer.stages["pilot"]["status"] == "succeeded" and answer.stages["pilot"]["probes"], answer.stages["pilot"]
    assert answer.recommended_group_size in (2, 4) and {g for g, _ in calls} == {2, 4}, (answer, calls)


class _RightTask:
    """A built-in task's stand-in (not RewardTerms): reward 1 for a completion that starts "right", else 0."""

    def rewards(self, problems, texts, rng):
        return np.array([1.0 if t.startswith("right") else 0.0 for t in texts])


def _generation(rows: list[int], texts: list[str]) -> dict:
    """One generation through TrlRewards as TRL calls its first reward function (G = 2, B = 4, before step 2)."""
    from types import SimpleNamespace

    from workers.engines.trl import ROW, TrlRewards

    args = SimpleNamespace(num_generations=2, generation_batch_size=4, reward_weights=[1.0], max_completion_length=8,
                           multi_objective_aggregation="sum_then_normalize")  # fmt: skip
    rewards = TrlRewards(_RightTask(), [f"p{i}" for i in range(3)], args)
    values = rewards.functions()[0](texts, [[1]] * len(texts), **{ROW: rows, "trainer_state": SimpleNamespace(global_step=1)})
    assert values == [1.0 if t.startswith("right") else 0.0 for t in texts]
    return rewards.pending


def test_trls_groups_are_checked_and_give_the_realized_g_and_the_no_signal_causes():
    """TrlRewards on one generation (no TRL training): its groups' metrics for the step's log; rows that are not G
    consecutive completions of one prompt (here interleaved, then one dropped) fail naming the realized G."""
    from workers.groups import GroupSizeError

    assert _generation([0, 0, 1, 1], ["same", "same", "wrong", "also wrong"]) == {
        "realized_group_size_min": 2.0,
        "realized_group_size_max": 2.0,
        "frac_groups_identical": 0.5,
        "frac_groups_all_wrong": 0.5,
        "frac_groups_all_right": 0.0,
    }
    assert _generation([2, 2, 1, 1], ["right", "right!", "right", "wrong"])["frac_groups_all_right"] == 0.5
    with pytest.raises(GroupSizeError, match="^realized group size 1 at step 2, configured G = 2 "):
        _generation([0, 1, 0, 1], ["a", "b", "c", "d"])
    with pytest.raises(GroupSizeError, match="^realized group size 1 to 2 at step 2, configured G = 2 "):
        _generation([0, 0, 1], ["a", "b", "c"])

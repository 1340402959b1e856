"""``engine: trl``: a trial trained by TRL's own GRPOTrainer on the user's recipe, within the measurement harness.

The recipe's GRPOConfig fields (spec ``trl:``) reach TRL unchanged but for what a sweep must set (trl_arguments): G,
B as a generation batch that keeps the recipe's optimizer steps per generation (sweeps.trl_steps), T, the seed, the
trial's checkpoint folder (one sealed checkpoint kept, optimizer state and every rank's RNG included:
workers.engines.trl_checkpoints), logging every step, no reporter.
Model, data and rewards are those of the ``task:`` and ``model:`` sections, loaded as the groupscale engine loads them;
the reward terms run in the task's reward process and reach TRL as ``reward_funcs`` with ``reward_weights``. A
TrainerCallback feeds the harness (workers.engines.harness): TRL's per-step logs under TRL's names, groupscale's
held-out ``gap``, a save only where the harness says (never inside a generation cycle), its TrialState inside TRL's
trainer_state.json. The reward path counts each generation once (however many optimizer steps reuse it), checks that
its groups are G completions of one prompt (else the trial fails naming the realized G) and adds the groups' metrics to
the step that generated; ``truncation_rate`` repeats TRL's ``completions/clipped_ratio`` under groupscale's name.

Source: TRL 1.16, ``GRPOTrainer`` and ``GRPOConfig`` (trl/trainer/grpo_trainer.py, grpo_config.py).
"""

from __future__ import annotations

import importlib.util
import math
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from sweeps import storage
from sweeps.engines.trl import coerce
from sweeps.trial import TrialConfig, TrialOutcome, TrialResult
from sweeps.trl_steps import structure_for
from workers.algos import zero_variance_group_fraction
from workers.batch import setup
from workers.distributed import accelerate_env, all_gather
from workers.engines.base import ALONE, Placement, Report, RunReport, run_report
from workers.engines.harness import Harness, TrialFailed
from workers.engines.trl_checkpoints import STATE, agree, output_dir, saved_state, seal
from workers.groups import GroupSizeError, check_group_sizes, group_metrics, realized_group_sizes
from workers.models.lora import lora_config
from workers.rewards import RewardError, TrainerState
from workers.rewards.builtin import text_of
from workers.tasks import Problem, Task
from workers.tasks.base import RewardTerms

ROW = "groupscale_row"  # the dataset column that maps TRL's rows back to the task's problems


def trl_arguments(cfg: TrialConfig, placement: Placement = ALONE) -> dict[str, Any]:
    """The GRPOConfig keyword arguments of the trial: the recipe with the fields a sweep sets (module docstring). TRL
    saves where the harness says (TrialCallback); ``save_steps`` 1 lets it save at any step."""
    structure = structure_for(cfg.trl, cfg.samples_per_step, cfg.num_processes)  # the recipe's steps on P processes
    # the recipe, but for what the sweep sets: the values below, steps_per_generation (it follows from them) and
    # reward_weights (each task.rewards entry's weight; the spec refuses trl.reward_weights)
    args = {k: v for k, v in coerce(cfg.trl).items() if k not in ("steps_per_generation", "reward_weights")}
    args |= structure.config() | {
        "num_generations": cfg.group_size,
        "max_steps": cfg.steps,
        "seed": cfg.seed,
        "output_dir": str(output_dir(cfg, placement)),
        "logging_steps": 1,
        "report_to": "none",
        "save_strategy": "steps" if cfg.checkpoint_dir and cfg.checkpoint_every else "no",
        "save_steps": 1,
        "save_total_limit": None,  # trl_checkpoints.seal drops the older checkpoint once the new one is sealed
        "save_only_model": False,  # the optimizer, scheduler and RNG states too: a resumed trial goes on as it was
        "restore_callback_states_from_checkpoint": False,  # the harness reads its state from the checkpoint itself
        "disable_tqdm": True,
    }
    if cfg.device == "cpu":
        args |= {"use_cpu": True, "bf16": False, "fp16": False}
    return args  # what the recipe leaves out is TRL's default (max_completion_length, temperature, ...), as in TRL


# The GRPOConfig fields a trial's run shows as params (``trl.<field>``), as TRL ran them, beside the recipe's own.
SHOWN = ("learning_rate", "max_completion_length", "temperature", "top_p", "beta", "loss_type", "scale_rewards",
         "epsilon", "epsilon_high", "num_iterations", "steps_per_generation", "per_device_train_batch_size",
         "gradient_accumulation_steps", "generation_batch_size", "num_generations", "max_steps")  # fmt: skip


def trained_settings(args: Any, recipe: dict[str, Any]) -> dict[str, str]:
    """``trl.<field>`` -> the value TRL runs with (``args``, a GRPOConfig): SHOWN and every field the recipe sets."""
    names = dict.fromkeys([*SHOWN, *recipe])
    return {f"trl.{k}": str(getattr(args, k))[:6000] for k in names if hasattr(args, k) and k not in {"reward_weights"}}


def reward_weights(task: Task) -> list[float]:
    """TRL's ``reward_weights``: each reward term's weight, in the order of the task's terms."""
    return [float(s.get("weight", 1.0)) for s in task.reward_specs] if isinstance(task, RewardTerms) else [1.0]


def silent_generation(per_term: list[np.ndarray], weights: list[float], group_size: int, aggregation: str) -> bool:
    """Whether a generation gives no learning signal: in every group the rewards that shape the advantage are equal
    (within algos.STD_FLOOR), so every advantage is 0.

    Args:
        per_term: each reward term's values, (B,) float64, NaN where the term abstained (counted 0, as the
            groupscale engine counts it); rows in groups of ``group_size`` consecutive completions (TRL's RepeatSampler).
        weights: the terms' weights (TRL's reward_weights).
        aggregation: TRL's ``multi_objective_aggregation``: ``sum_then_normalize`` compares the weighted sum within
            each group; ``normalize_then_sum`` normalizes each term within its group, so each term is compared.
    """
    weighted = [w * np.nan_to_num(v, nan=0.0) for v, w in zip(per_term, weights, strict=True)]
    columns = [np.sum(weighted, axis=0)] if aggregation == "sum_then_normalize" else weighted
    return all(zero_variance_group_fraction(torch.as_tensor(c).view(-1, group_size)) == 1.0 for c in columns)


class TrlRewards:
    """The task's reward terms as TRL ``reward_funcs``: one callable per term, all served by one scoring of a batch.

    TRL calls the functions in order with the same keyword arguments, once per generation; the first scores every
    term (in the task's reward process, workers.rewards), replays what they logged through TRL's ``log_metric`` and
    ``log_extra``, checks the generation's groups (check_generation: ``pending`` holds its metrics for the next log)
    and counts it: ``count(silent, reward_mean, truncation)`` (the harness's ``generation``; silent_generation says
    whether it gave no signal; truncation: the share that reached max_completion_length); the others read their term's
    values. Rows come back to the task's problems by the ROW column.
    """

    def __init__(
        self, task: Task, problems: list[Problem], args: Any, count: Callable[[bool, float, float], None] = lambda *a: None
    ) -> None:
        self.task, self.problems, self.args, self.count = task, problems, args, count
        self.keys = task.reward_keys if isinstance(task, RewardTerms) else ["reward"]  # a built-in task: one reward
        self._batch: dict[str, np.ndarray] = {}
        self.pending: dict[str, float] = {}

    def functions(self) -> list[Any]:
        return [self._term(i, key) for i, key in enumerate(self.keys)]

    def _term(self, index: int, key: str) -> Any:
        def reward(completions: list[Any], completion_ids: list[list[int]], **kwargs: Any) -> list[float | None]:
            if index == 0:  # a new generation
                self._batch = self._scores(completions, completion_ids, kwargs)
            return [None if math.isnan(v) else float(v) for v in self._batch[key]]

        reward.__name__ = key  # TRL logs rewards/<name>/mean
        return reward

    def _scores(self, completions: list[Any], completion_ids: list[list[int]], kwargs: dict[str, Any]) -> dict[str, np.ndarray]:
        """This process's completions scored. On several processes each scores its share of the generation (TRL's
        layout: the ranks' shares in rank order make the generation, groups consecutive); a reward failure on any rank
        fails every rank here (none waits in TRL's gather for one that stopped), and the silent count reads the
        whole generation."""
        rows, g = kwargs[ROW], self.args.num_generations
        problems = [self.problems[i] for i in rows]
        texts = [text_of(c) for c in completions]
        own, per_term = None, {}
        try:
            per_term = self._score(problems, texts, completion_ids, kwargs)
        except RewardError as e:
            own = e
        # one exchange a generation: each rank's failure (or None), rows, texts, truncations and values
        cut = [len(ids) >= self.args.max_completion_length for ids in completion_ids]
        mine = [per_term.get(key) for key in self.keys]
        shares = all_gather((None if own is None else str(own), list(rows), texts, cut, mine))
        if own is not None:
            raise own
        agreed = next((failure for failure, *_ in shares if failure is not None), None)
        if agreed is not None:
            raise RewardError(agreed)
        rows, texts, cut = ([x for share in shares for x in share[i]] for i in (1, 2, 3))
        values = [np.concatenate([share[-1][i] for share in shares]) for i in range(len(self.keys))]
        self.pending, reward = self.check_generation(rows, texts, values, kwargs["trainer_state"].global_step + 1)
        silent = silent_generation(values, self.args.reward_weights, g, self.args.multi_objective_aggregation)
        self.count(silent, float(reward.mean()), float(np.mean(cut)))
        return per_term

    def check_generation(
        self, rows: list[int], texts: list[str], values: list[np.ndarray], step: int
    ) -> tuple[dict[str, float], np.ndarray]:
        """The metrics of a whole generation's groups (TRL's layout: G consecutive rows a group, generation_batch_size
        rows): the realized group sizes (workers.groups.realized_group_sizes, a row's prompt: its ROW) and the no-signal
        causes of the weighted reward (abstentions 0), once checked that every group is G completions of one prompt;
        and that weighted reward, (S,).

        Args:
            rows: (S,) each completion's ROW; texts: (S,) the completions; values: each term's (S,) values;
            step: the optimizer step the generation is for (1-based).
        Raises:
            workers.groups.GroupSizeError: naming the realized group sizes.
        """
        g = self.args.num_generations
        sizes = [g] * max(1, self.args.generation_batch_size // g)
        realized = realized_group_sizes(rows, sizes)
        check_group_sizes(realized, sizes, step)
        weights = self.args.reward_weights
        reward = np.sum([w * np.nan_to_num(v, nan=0.0) for v, w in zip(values, weights, strict=True)], axis=0)
        return group_metrics(realized, sizes, reward, texts), reward

    def _score(self, problems: list[Problem], texts: list[str], completion_ids: list[list[int]], kwargs: dict) -> dict:
        if not isinstance(self.task, RewardTerms):
            return {"reward": self.task.rewards(problems, texts, np.random.default_rng(0)).astype(np.float64)}
        scored = self.task.score(problems, texts, completion_ids, _state(kwargs["trainer_state"]))
        for name, value in scored.logged.items():
            kwargs["log_metric"](name, value)
        for column, values in scored.extras.items():
            kwargs["log_extra"](column, values)
        return scored.per_function


def _state(trl_state: Any) -> TrainerState:
    """TRL's TrainerState as the reward process receives it (plain fields, no callbacks)."""
    return TrainerState(
        global_step=trl_state.global_step,
        max_steps=trl_state.max_steps,
        epoch=float(trl_state.epoch or 0.0),
        num_train_epochs=float(trl_state.num_train_epochs or 0.0),
        logging_steps=trl_state.logging_steps,
        train_batch_size=trl_state.train_batch_size or 0,
        log_history=list(trl_state.log_history),
    )


def _dataset(task: Task) -> tuple[Any, list[Problem]]:
    """TRL's train_dataset: the task's training problems with their columns and the ROW index (TRL samples them
    uniformly, as the groupscale engine does)."""
    from datasets import Dataset

    problems = task.train_support()[0]
    rows = [{**p.columns, "prompt": p.prompt, ROW: i} for i, p in enumerate(problems)]
    return Dataset.from_list(rows), problems


def _callbacks(cfg: TrialConfig, placement: Placement, harness: Harness, rewards: TrlRewards) -> list[Any]:
    """The trial's TrainerCallbacks: the harness's hands in TRL (each step's logs, with the generation's group metrics,
    to Harness.after_step; a save where Harness.checkpoint_due says; its TrialState exported into every checkpoint's
    trainer_state.json) and each checkpoint sealed by every rank (trl_checkpoints.seal)."""
    from transformers import TrainerCallback
    from transformers.trainer_callback import ExportableState

    class TrialState(TrainerCallback, ExportableState):
        def state(self) -> dict:
            return {"args": {}, "attributes": harness.state.to_checkpoint()}

        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            control.should_save = harness.checkpoint_due(state.global_step)

        def on_log(self, args: Any, state: Any, control: Any, logs: dict | None = None, **kw: Any) -> None:
            metrics = {k: float(v) for k, v in (logs or {}).items() if isinstance(v, int | float) and math.isfinite(v)}
            if state.global_step <= harness.state.step:  # training's own summary at its end (train_loss over this
                # start's steps, runtime...): not a step; its epoch is the last step's, logged with it already
                harness.report({k: v for k, v in metrics.items() if k != "epoch"}, state.global_step)
                return
            if "completions/clipped_ratio" in metrics:  # the groupscale engine's name for the same share
                metrics["truncation_rate"] = metrics["completions/clipped_ratio"]
            metrics |= rewards.pending  # the generation's groups, on the step that generated (as TRL's own)
            rewards.pending = {}
            harness.after_step(state.global_step, metrics)

    class SealCheckpoints(TrainerCallback):
        """Each checkpoint TRL wrote, sealed as one unit by every rank (uploaded, manifest last: trl_checkpoints)."""

        def on_save(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            seal(cfg, placement, Path(args.output_dir), state.global_step)

    assert TrialState.__name__ == STATE
    return [TrialState(), *([SealCheckpoints()] if cfg.checkpoint_dir else [])]


def missing_package(recipe: dict[str, Any]) -> tuple[str, str] | None:
    """(field, why) when the recipe names a package this process lacks: ``use_vllm`` needs vLLM, an 8-bit ``optim``
    (Unsloth's ``adamw_8bit``, ``paged_adamw_8bit``, ``*bnb*``) bitsandbytes; None when it lacks none. ``why`` starts
    with the value, not the field (a 422's loc names it; a trial's reason adds it)."""
    optim = str(recipe.get("optim", ""))
    needs = [
        ("use_vllm", "vllm", "pip install 'groupscale[vllm]'", str(recipe.get("use_vllm", False)).lower() == "true"),
        ("optim", "bitsandbytes", "pip install bitsandbytes", "8bit" in optim or "bnb" in optim),
    ]
    for field, package, how, named in needs:
        if named and importlib.util.find_spec(package) is None:
            return field, f"{recipe[field]!r} needs {package}, which the workers lack: {how}"
    return None


def recipe_refusal(cfg: TrialConfig, n_rewards: int) -> tuple[str | None, str] | None:
    """(field or None, why) when the recipe cannot train where this runs (a worker, at submit): a package it names
    is missing (``missing_package``) or TRL refuses the GRPOConfig it gives (``auto_find_batch_size``, a value of
    the wrong kind, ...); None when it builds. The field: the recipe's that TRL's message names first."""
    from trl import GRPOConfig

    missing = missing_package(cfg.trl)
    if missing is not None:
        return missing
    with tempfile.TemporaryDirectory() as out:
        try:
            GRPOConfig(**{**trl_arguments(cfg), "output_dir": out}, reward_weights=[1.0] * n_rewards)
        except Exception as e:  # noqa: BLE001 - TRL's and transformers' own checks: said at submit, naming the field
            named = sorted((str(e).find(k), k) for k in cfg.trl if k in str(e))  # the one TRL names first
            return (named[0][1] if named else None), f"TRL refuses the recipe's GRPOConfig: {type(e).__name__}: {e}"
    return None


def train_trial_trl(cfg: TrialConfig, report: Report = lambda m, s: None, placement: Placement | None = None) -> TrialResult:
    """One trial with TRL's GRPOTrainer within the measurement harness (module docstring); ``placement``: this process
    in the trial (default: alone on cfg.device). Returns a TrialResult: ``failed`` with TRL's exception, a reward
    function's failure or groups of another size than G (workers.groups.GroupSizeError), else the harness's end
    (``no_signal`` counts each generation once, however many optimizer steps reuse it)."""
    placement = placement or Placement.alone(cfg.device)
    run = run_report(report if placement.is_main else lambda metrics, step: None)  # rank 0 logs (TRL's logs are reduced)
    missing = missing_package(cfg.trl)
    if missing is not None:
        return TrialResult(TrialOutcome.FAILED, reason=f"trl.{missing[0]}: {missing[1]}")
    if placement.world_size > 1:
        os.environ.update(accelerate_env(placement))  # before GRPOConfig: its accelerate state takes this process group
    task, policy, _ = setup(cfg)
    try:
        return _train(cfg, placement, run, task, policy)
    except TrialFailed as failed:
        return failed.result
    except (RewardError, GroupSizeError) as e:
        return TrialResult(TrialOutcome.FAILED, reason=str(e))
    except (ValueError, RuntimeError, TypeError, torch.OutOfMemoryError) as e:  # TRL's own refusals and failures
        return TrialResult(TrialOutcome.FAILED, reason=f"TRL: {type(e).__name__}: {str(e)[:500]}")
    finally:
        task.close()  # the reward process of a dataset task
        if cfg.checkpoint_dir and storage.is_remote(cfg.checkpoint_dir):  # the local copy: storage holds the checkpoints
            shutil.rmtree(output_dir(cfg, placement), ignore_errors=True)


def _train(cfg: TrialConfig, placement: Placement, run: RunReport, task: Task, policy: Any) -> TrialResult:
    """The trial's GRPOTrainer, started from TRL's last complete checkpoint (its TrialState given to the harness) or
    fresh; trained only while steps are left (a checkpoint at T: its weights are loaded and the trial ends)."""
    from transformers import PrinterCallback
    from trl import GRPOConfig, GRPOTrainer

    data, problems = _dataset(task)
    args = GRPOConfig(**trl_arguments(cfg, placement), reward_weights=reward_weights(task))
    run.log_params(trained_settings(args, cfg.trl))  # the run shows what TRL ran, defaults included
    cycle = structure_for(cfg.trl, cfg.samples_per_step, cfg.num_processes).generation_cycle
    harness = Harness(cfg, placement, run, task, policy, unit="generations", cycle=cycle)
    rewards = TrlRewards(task, problems, args, harness.generation)
    lora = cfg.model.get("lora")
    trainer = GRPOTrainer(
        model=policy.module,
        reward_funcs=rewards.functions(),
        args=args,
        train_dataset=data,
        processing_class=policy.tokenizer,
        callbacks=_callbacks(cfg, placement, harness, rewards),
        peft_config=lora_config(lora) if lora else None,  # peft injects the adapter into policy.module in place
    )
    trainer.remove_callback(PrinterCallback)  # its logs are in MLflow; worker logs need not repeat them
    resume = agree(cfg, placement, Path(args.output_dir)) if cfg.checkpoint_dir else None  # every rank the same one
    harness.start(saved_state(resume) if resume else None)
    if harness.steps:
        trainer.train(resume_from_checkpoint=resume)
    elif resume is not None:  # the checkpoint is at T: TRL would train step T + 1 on a resume
        trainer._load_from_checkpoint(resume)  # the weights the final eval reads
    return harness.finish()

"""The measurement protocol of every engine's trial, written once: how a trial starts (fresh, after the held-out eval
before step 1, or from its checkpoint's TrialState), what follows each optimizer step (its metrics reported, the evals
at ``eval.every``'s checkpoints, the probe every ``probe.every`` steps), when a checkpoint is due (never inside a
generation cycle; the engine saves it, the TrialState with its own state), the no-signal verdict and how it ends (a
trial whose checkpoint is at T evaluates and ends; a resume never trains a step past T). An engine keeps only its steps
(verl's ``BaseEngine.train_batch`` is the model: the protocol in one place, members fill in primitives): groupscale's
trainer its loop (workers.engines.groupscale), TRL's its GRPOTrainer and a TrainerCallback that forwards here
(workers.engines.trl). Ray and MLflow stay at the edge: metrics leave through the trial's ``report``.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

from sweeps.metrics import KEPT_AT_CHECKPOINTS, result_metrics, summarize, summary_metrics
from sweeps.trial import TrialConfig, TrialOutcome, TrialResult
from workers.distributed import first_failure
from workers.engines.base import Placement, RunReport
from workers.evaluation import evaluate
from workers.models.base import Policy
from workers.models.lora import parameter_counts
from workers.probe import probe_during_training
from workers.tasks import Task
from workers.tasks.dataset import DatasetTask

NO_SIGNAL_FRACTION = 0.5  # a trial with more generations than this share without any signal is no_signal


@dataclass
class TrialState:
    """What a trial has measured so far: saved in each of its checkpoints, read back when it resumes.

    step: the last optimizer step done (0 before the first); initial, samples: the eval before step 1 (its metrics,
    its rows for MLflow's table); evals: step -> KEPT_AT_CHECKPOINTS of each eval on the way; log_history: the reported
    step metrics (reward functions' ``trainer_state.log_history``); summary: sweeps.metrics.summarize's fold of them;
    generations, silent: generations scored and those without signal; reward_sum, truncation_sum: their mean reward
    and truncated share, summed (the no-signal reason).
    """

    step: int = 0
    initial: dict[str, float] = field(default_factory=dict)
    samples: list[dict] = field(default_factory=list)
    evals: dict[int, dict[str, float]] = field(default_factory=dict)
    log_history: list[dict] = field(default_factory=list)
    summary: dict[str, list[float]] = field(default_factory=dict)
    generations: int = 0
    silent: int = 0
    reward_sum: float = 0.0
    truncation_sum: float = 0.0

    def to_checkpoint(self) -> dict[str, Any]:
        """Plain JSON-able data (the evals' steps as strings)."""
        return asdict(self) | {"evals": {str(s): v for s, v in self.evals.items()}}

    @classmethod
    def from_checkpoint(cls, saved: dict[str, Any]) -> TrialState:
        """The state ``to_checkpoint`` gave."""
        return cls(**saved | {"evals": {int(s): v for s, v in saved["evals"].items()}})


@dataclass(frozen=True)
class Phase:
    """What a trial is doing, for the reason it fails there: the reason ends "... at <label>"; ``step`` and ``where``
    go to the engine's out-of-memory advice; ``done`` is the steps completed."""

    label: str
    step: int
    done: int
    where: str = "training"


class TrialFailed(Exception):
    """A trial that ended failed in a phase (every rank raises it together: Harness.guarded)."""

    def __init__(self, result: TrialResult) -> None:
        super().__init__(result.reason)
        self.result = result


def no_signal_reason(reward_mean: float, truncation: float) -> str:
    """Why groups had equal rewards, from the mean reward and the truncated share of the generations."""
    if truncation > 0.5:
        return f"most completions were truncated ({truncation:.0%}): raise max_new_tokens"
    if reward_mean < 0.05:
        return f"almost every completion failed (mean reward {reward_mean:.3f}): task too hard for this model"
    if reward_mean > 0.95:
        return f"almost every completion succeeded (mean reward {reward_mean:.3f}): task too easy"
    return "groups had equal rewards in most steps: raise the temperature"


class Harness:
    """One trial's measurement protocol around an engine's steps (module docstring).

    Args:
        cfg, placement: the trial and where this process runs in it (rank 0 evaluates, probes and logs).
        report: the trial's run (workers.engines.base.run_report).
        task, policy: set up by the engine (the policy is the one it trains).
        unit: what the no-signal count counts, in words (groupscale: steps; TRL: generations).
        cycle: optimizer steps of one generation cycle (a checkpoint falls only where a cycle ends).
        hidden: step metrics not reported (constant by construction under the trial's settings).
        oom_advice: ``(step, where) -> reason`` for a GPU out of memory (None: the error's own message).
    """

    def __init__(
        self,
        cfg: TrialConfig,
        placement: Placement,
        report: RunReport,
        task: Task,
        policy: Policy,
        unit: str = "steps",
        cycle: int = 1,
        hidden: Collection[str] = (),
        oom_advice: Callable[[int, str], str] | None = None,
    ) -> None:
        self.cfg, self.placement, self.report, self.task, self.policy = cfg, placement, report, task, policy
        self.unit, self.cycle, self.hidden, self.oom_advice = unit, cycle, set(hidden), oom_advice
        self.state = TrialState()
        self._evals = set(cfg.eval.checkpoints(cfg.steps)) - {cfg.steps}  # before the last: finish() evaluates T

    @contextmanager
    def guarded(self, phase: Phase) -> Iterator[None]:
        """Turn a failing reward function, a non-finite value, groups cut to another size than G (GroupSizeError,
        whose reason names its step) or a GPU out of memory inside ``phase`` into a failed TrialResult with the phase
        and the cause, raised as TrialFailed. On several processes every rank enters the same phases, and such a failure
        on any rank fails all of them here (the first rank's cause), so none waits on a collective the failed rank
        will not reach; any other exception ends its process, and the others' next collective raises."""
        import torch

        from workers.groups import GroupSizeError
        from workers.rewards import RewardError

        failed = None
        try:
            yield
        except GroupSizeError as e:  # names its step itself
            failed = TrialResult(TrialOutcome.FAILED, reason=str(e), steps_done=phase.done)
        except (RewardError, FloatingPointError) as e:
            failed = TrialResult(TrialOutcome.FAILED, reason=f"{e} at {phase.label}", steps_done=phase.done)
        except torch.OutOfMemoryError as e:
            reason = self.oom_advice(phase.step, phase.where) if self.oom_advice else f"{e} at {phase.label}"
            failed = TrialResult(TrialOutcome.FAILED, reason=reason, steps_done=phase.done)
        failed = first_failure(failed)
        if failed is not None:
            raise TrialFailed(failed)

    def start(self, saved: dict[str, Any] | None) -> None:
        """From ``saved`` (the TrialState of the checkpoint the engine restored), or fresh: the held-out eval before
        step 1, reported at step 0 with the parameter counts (the gap's chart starts there); a dataset task's params
        say how its prompts reach the model (DatasetTask.prompt_params: chat or raw, and the template file) and how each
        reward is called (DatasetTask.reward_params: the convention auto took)."""
        if isinstance(self.task, DatasetTask):
            self.report.log_params(self.task.prompt_params | self.task.reward_params)
        if saved is not None:
            self.state = TrialState.from_checkpoint(saved)
            self.report({"resumed_from_step": float(self.state.step)}, self.state.step)
            return
        with self.guarded(Phase("the evaluation before step 1", 0, 0, "the evaluation")):
            initial, samples = evaluate(self.policy, self.task, self.cfg, 0) if self.placement.is_main else ({}, [])
        self.report(initial | parameter_counts(self.policy.module), 0)
        self.state = TrialState(initial=initial, samples=samples)

    @property
    def steps(self) -> range:
        """The optimizer steps left to train: none once the state is at T."""
        return range(self.state.step + 1, self.cfg.steps + 1)

    def generation(self, silent: bool, reward_mean: float, truncation: float) -> None:
        """Count one generation: whether it gave no signal (every group's rewards equal), its mean reward and its
        truncated share."""
        self.state.generations += 1
        self.state.silent += int(silent)
        self.state.reward_sum += reward_mean
        self.state.truncation_sum += truncation

    def after_step(self, step: int, metrics: dict[str, float]) -> None:
        """Step ``step`` is done with ``metrics``: reported (but the hidden ones) and kept, then the eval and the probe
        when they fall here; the points are flushed when a checkpoint follows (points first: a worker killed in
        between logs some steps twice on resume, never skips one)."""
        summarize(self.state.summary, metrics)
        shown = {k: v for k, v in metrics.items() if k not in self.hidden}
        self.report(shown, step)
        self.state.log_history.append({**shown, "step": step})
        self.state.step = step
        main = self.placement.is_main
        if step in self._evals:
            with self.guarded(Phase(f"the evaluation of step {step}", step, step, "the evaluation")):
                mid = evaluate(self.policy, self.task, self.cfg, step, self.state.log_history)[0] if main else {}
            self.report(mid, step)
            self.state.evals[step] = {k: mid[k] for k in KEPT_AT_CHECKPOINTS if k in mid}
        if self.cfg.probe.every and step % self.cfg.probe.every == 0:  # the probe's G* as the policy moves
            with self.guarded(Phase(f"the probe of step {step}", step, step, "the probe")):
                probed = probe_during_training(self.policy, self.task, self.cfg, step) if main else {}
            self.report(probed, step)
        if self.checkpoint_due(step):
            self.report.flush()

    def checkpoint_due(self, step: int) -> bool:
        """Whether the trial checkpoints after ``step``: at T, and where a generation cycle ends that holds a multiple
        of checkpoint_every (every such multiple with one-step cycles); never without a checkpoint folder."""
        every, t = self.cfg.checkpoint_every, self.cfg.steps
        if not (self.cfg.checkpoint_dir and every):
            return False
        return step == t or (step % self.cycle == 0 and step // every > (step - self.cycle) // every)

    def finish(self) -> TrialResult:
        """After the last step: no_signal when most generations had no signal, else the final eval and the trial's
        metrics; both with the steps' summary (sweeps.metrics.SUMMARIZED). Rank 0's result is the trial's."""
        s, t = self.state, self.cfg.steps
        summary = summary_metrics(s.summary)
        if s.silent > NO_SIGNAL_FRACTION * s.generations:
            cause = no_signal_reason(s.reward_sum / s.generations, s.truncation_sum / s.generations)
            reason = f"{s.silent}/{s.generations} {self.unit} without signal; {cause}"
            return TrialResult(TrialOutcome.NO_SIGNAL, metrics=summary, reason=reason, steps_done=t)
        main = self.placement.is_main
        with self.guarded(Phase(f"the final evaluation (step {t})", t, t, "the evaluation")):
            final, last = evaluate(self.policy, self.task, self.cfg, t, s.log_history) if main else ({}, [])
        if not main:
            return TrialResult(TrialOutcome.SUCCEEDED, steps_done=t)
        self.report(final, t)
        if s.samples + last:
            self.report.log_table(s.samples + last)
        metrics = result_metrics(final, s.initial, s.evals) | summary
        return TrialResult(TrialOutcome.SUCCEEDED, metrics=metrics, steps_done=t)

"""What `groupscale answer`'s stages and the grid they stand in for cost, in sampled completions (torch-free).

``grid_cost`` is the reference every budget is a share of (the default budget: ``DEFAULT_FRACTION`` of it);
``trial_cost`` prices one trial, ``rung_cost`` one (G, seed) on a halving rung, ``halving_cost`` a whole halving.
A completion is one sampled response to one prompt, in training, in a held-out eval or in a probe.
``grid_seconds`` prices the grid in seconds at rates the answer measured, so that its share holds in time as well.
"""

from __future__ import annotations

from collections.abc import Sequence

from sweeps.engines import get_engine
from sweeps.planner import plan_trials
from sweeps.spec import SweepSpec

DEFAULT_FRACTION = 0.01  # the default budget: this share of the grid's completions


def eval_completions(spec: SweepSpec, prompts: int | None = None) -> int:
    """Completions one held-out eval samples: prompts x 1 where the task's expected reward is exact
    (bandit, arithmetic, exact_match data: one sampled completion each for the logged sample), else
    prompts x eval.samples_per_prompt."""
    prompts = spec.eval.prompts if prompts is None else prompts
    exact = spec.task.exact_expected_reward
    return prompts * (1 if exact else spec.eval.samples_per_prompt)


def trial_cost(spec: SweepSpec, length: int, samples_per_step: int, evals: int, eval_prompts: int | None = None) -> int:
    """Sampled completions of a trial: what its engine samples for ``length`` steps at B (groupscale: length x B;
    TRL: its generations, sweeps.engines) plus ``evals`` held-out evals (measure outcome), or ``length`` gradient
    draws x B (measure gradient_mse, which has no eval)."""
    if spec.measure.kind == "gradient_mse":
        return length * samples_per_step
    return get_engine(spec.engine).sampled(spec, length, samples_per_step) + evals * eval_completions(spec, eval_prompts)


def grid_cost(spec: SweepSpec) -> int:
    """Sampled completions of the full grid the spec describes: every (G, B, seed) trial for T steps with its
    evals (the one before step 1 and one per checkpoint), or ``measure.repeats`` draws per gradient_mse trial."""
    length = spec.measure.repeats if spec.measure.kind == "gradient_mse" else spec.steps
    evals = 1 + len(spec.eval.checkpoints(spec.steps))
    return sum(trial_cost(spec, length, p.samples_per_step, evals) for p in plan_trials(spec))


def rung_cost(spec: SweepSpec, before: int, length: int, b: int, resume: bool, eval_prompts: int) -> int:
    """Completions of one (G, seed) on a halving rung from ``before`` to ``length``: trained on from its checkpoint
    with the eval before step 1 on the first rung and one at the rung's end (outcome), or drawn anew (gradient_mse)."""
    if not resume:
        return trial_cost(spec, length, b, 0, eval_prompts)
    return trial_cost(spec, length - before, b, 1 + (1 if before == 0 else 0), eval_prompts)


def halving_cost(spec: SweepSpec, n: int, seeds: int, lengths: Sequence[int], b: int, resume: bool, eval_prompts: int) -> int:
    """Completions of a successive halving of ``n`` G x ``seeds`` seeds over rungs ``lengths`` (n // 2 survive each)."""
    total, survivors, before = 0, n, 0
    for length in lengths:
        total += survivors * seeds * rung_cost(spec, before, length, b, resume, eval_prompts)
        before, survivors = length, max(1, survivors // 2)
    return total


def grid_seconds(spec: SweepSpec, train_s: float, generate_s: float) -> float:
    """Seconds the full grid would take at the answer's measured rates: each trial's training completions (what its
    engine samples for T steps) at ``train_s`` seconds a completion (generation, scoring and update) and its evals'
    (the one before step 1 and one per checkpoint) at ``generate_s`` (generation alone). For an outcome measure."""
    evals = 1 + len(spec.eval.checkpoints(spec.steps))
    engine = get_engine(spec.engine)
    return sum(
        engine.sampled(spec, spec.steps, p.samples_per_step) * train_s + evals * eval_completions(spec) * generate_s
        for p in plan_trials(spec)
    )

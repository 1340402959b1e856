"""`groupscale answer`'s plan: what each stage costs in sampled completions, and how a budget is split among them.

The stages (the probe, the pilot, the halving) are described in sweeps.answer; this module only prices them:
``grid_cost`` (the grid the spec describes, the default budget's reference), ``trial_cost``, ``rung_cost``, and
``plan_answer``, which fits the stages into a budget (``SHARES``) and says which it skips and why. Torch-free.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from sweeps.planner import plan_trials
from sweeps.spec import SweepSpec

DEFAULT_FRACTION = 0.01  # the default budget: this share of the grid's completions
SHARES = {"probe": 0.3, "pilot": 0.2, "halving": 0.5}  # of the budget; a stage that cannot run leaves its share to the next
HALVING_SEEDS = 2  # seeds per G on the halving's rungs: the seed noise that g_matters is judged against
MIN_TRAIN_STEPS = 2  # a pilot or rung shorter than this is not run
MIN_DRAWS = 4  # a gradient_mse rung of fewer draws is not run
MIN_PROBE_PROMPTS = 8
PILOT_PROBE_PROMPTS = 64  # K of the pilot's probe at its last step
ANSWER_EVAL_PROMPTS = 32  # held-out prompts of the answer's evals (at most the spec's; the same for every G: paired)
TRL_DEFAULT_G = 8  # GRPOConfig.num_generations
N_BOOT = 200


class BudgetTooSmall(ValueError):
    """The budget does not pay for the smallest probe."""


def eval_completions(spec: SweepSpec, prompts: int | None = None) -> int:
    """Completions one held-out eval samples: prompts x 1 where the task's expected reward is exact
    (bandit, arithmetic, exact_match data: one sampled completion each for the logged sample), else
    prompts x eval.samples_per_prompt."""
    prompts = spec.eval.prompts if prompts is None else prompts
    exact = spec.task.name in ("bandit", "arithmetic") or getattr(spec.task, "exact_expected_reward", False)
    return prompts * (1 if exact else spec.eval.samples_per_prompt)


def trial_cost(spec: SweepSpec, length: int, samples_per_step: int, evals: int, eval_prompts: int | None = None) -> int:
    """Sampled completions of a trial: ``length`` steps x B plus ``evals`` held-out evals (measure outcome),
    or ``length`` gradient draws x B (measure gradient_mse, which has no eval)."""
    if spec.measure.kind == "gradient_mse":
        return length * samples_per_step
    return length * samples_per_step + evals * eval_completions(spec, eval_prompts)


def grid_cost(spec: SweepSpec) -> int:
    """Sampled completions of the full grid the spec describes: every (G, B, seed) trial for T steps with its
    evals (the one before step 1 and one per checkpoint), or ``measure.repeats`` draws per gradient_mse trial."""
    length = spec.measure.repeats if spec.measure.kind == "gradient_mse" else spec.steps
    evals = 1 + len(spec.eval.checkpoints(spec.steps))
    return sum(trial_cost(spec, length, p.samples_per_step, evals) for p in plan_trials(spec))


@dataclass(frozen=True)
class Probe:
    prompts: int  # K
    completions: int  # M

    @property
    def cost(self) -> int:
        return self.prompts * self.completions


@dataclass(frozen=True)
class Pilot:
    group_size: int
    samples_per_step: int
    steps: int
    probe: Probe  # at the pilot's last step
    eval_prompts: int
    cost: int


@dataclass(frozen=True)
class Halving:
    """Successive halving at one budget: ``group_sizes`` x ``seeds`` seeds; rung r runs its survivors to
    ``lengths[r]`` steps (gradient_mse: draws); ``survivors[r]`` G reach rung r (Optuna keeps n // 2)."""

    samples_per_step: int
    group_sizes: tuple[int, ...]
    seeds: int
    lengths: tuple[int, ...]
    survivors: tuple[int, ...]
    resume: bool  # outcome trials continue from the previous rung's checkpoint; gradient_mse draws anew
    eval_prompts: int
    cost: int


@dataclass(frozen=True)
class AnswerPlan:
    budget: int  # completions
    grid: int  # completions of the full grid
    probe: Probe
    pilot: Pilot | None
    halving: Halving | None
    skipped: dict[str, str]  # stage -> why it does not run

    @property
    def cost(self) -> int:
        """The most this plan can spend (stages that end early spend less)."""
        return self.probe.cost + (self.pilot.cost if self.pilot else 0) + (self.halving.cost if self.halving else 0)

    def to_dict(self) -> dict:
        return asdict(self)


def _halving_cost(spec: SweepSpec, n: int, seeds: int, lengths: Sequence[int], b: int, resume: bool, eval_prompts: int) -> int:
    total, survivors, before = 0, n, 0
    for length in lengths:
        total += survivors * seeds * rung_cost(spec, before, length, b, resume, eval_prompts)
        before, survivors = length, max(1, survivors // 2)
    return total


def rung_cost(spec: SweepSpec, before: int, length: int, b: int, resume: bool, eval_prompts: int) -> int:
    """Completions of one (G, seed) on a halving rung from ``before`` to ``length``: trained on from its checkpoint
    with the eval before step 1 on the first rung and one at the rung's end (outcome), or drawn anew (gradient_mse)."""
    if not resume:
        return trial_cost(spec, length, b, 0, eval_prompts)
    return trial_cost(spec, length - before, b, 1 + (1 if before == 0 else 0), eval_prompts)


def _rungs(first: int, cap: int, n: int, most: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Rung lengths first, 2 first, 4 first, ... (at most ``cap``; at most ``most`` rungs) while a halving leaves
    at least 2 G, and how many G run each rung."""
    lengths, survivors, length, alive = [], [], first, n
    while True:
        lengths.append(min(length, cap))
        survivors.append(alive)
        if alive // 2 < 2 or length >= cap or len(lengths) >= most:
            return tuple(lengths), tuple(survivors)
        alive, length = alive // 2, length * 2


def plan_answer(spec: SweepSpec, budget: int | None = None) -> AnswerPlan:
    """Split ``budget`` completions (default spec.answer.budget, else DEFAULT_FRACTION of grid_cost) over
    the probe, the pilot and the halving (SHARES; a stage that does not fit passes its share on).

    Raises:
        BudgetTooSmall: the budget does not pay for a probe of MIN_PROBE_PROMPTS x probe.completions.
    """
    grid = grid_cost(spec)
    x = int(budget or spec.answer.budget or max(1, round(DEFAULT_FRACTION * grid)))
    m = spec.probe.completions
    if x < MIN_PROBE_PROMPTS * m:
        raise BudgetTooSmall(
            f"budget {x} completions is below the smallest probe ({MIN_PROBE_PROMPTS} prompts x {m} completions = "
            f"{MIN_PROBE_PROMPTS * m}); the grid costs {grid}: give --budget of at least {MIN_PROBE_PROMPTS * m}"
        )
    probe = Probe(min(spec.probe.prompts, max(MIN_PROBE_PROMPTS, int(SHARES["probe"] * x) // m)), m)
    left, skipped = x - probe.cost, {}
    b0 = min(spec.samples_per_step)
    outcome = spec.measure.kind == "outcome"
    eval_prompts = min(spec.eval.prompts, ANSWER_EVAL_PROMPTS)
    pilot = None
    if not outcome:
        skipped["pilot"] = "measure gradient_mse: the policy does not train, so it has no drift to show"
    else:
        pilot_g = min(spec.group_sizes, key=lambda g: (abs(math.log(g / TRL_DEFAULT_G)), g))
        share = int(SHARES["pilot"] * x)  # half of it for the probe at the pilot's end, at most PILOT_PROBE_PROMPTS prompts
        pprobe = Probe(max(MIN_PROBE_PROMPTS, min(PILOT_PROBE_PROMPTS, probe.prompts, share // 2 // m)), m)
        allowance = share - pprobe.cost - 2 * eval_completions(spec, eval_prompts)
        steps = min(spec.steps, allowance // b0) if allowance > 0 else 0
        if steps >= MIN_TRAIN_STEPS:
            pilot = Pilot(pilot_g, b0, steps, pprobe, eval_prompts, trial_cost(spec, steps, b0, 2, eval_prompts) + pprobe.cost)
            left -= pilot.cost
        else:
            skipped["pilot"] = f"{SHARES['pilot']:.0%} of the budget pays for fewer than {MIN_TRAIN_STEPS} steps at B = {b0}"
    gs = tuple(sorted(g for g in spec.group_sizes if b0 % g == 0))
    cap = spec.steps if outcome else spec.measure.repeats
    halving, shortest = None, MIN_TRAIN_STEPS if outcome else MIN_DRAWS

    def cost_of(first: int, most: int) -> tuple[int, tuple[int, ...], tuple[int, ...]]:
        lengths, survivors = _rungs(first, cap, len(gs), most)
        return _halving_cost(spec, len(gs), HALVING_SEEDS, lengths, b0, outcome, eval_prompts), lengths, survivors

    for most in range(len(gs), 0, -1):  # as many rungs as fit, then the longest first rung whose halving fits what is left
        if cost_of(shortest, most)[0] > left:
            continue
        lo, hi = shortest, cap  # the cost grows with the first rung's length: bisect (T may be 10^6 steps)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if cost_of(mid, most)[0] <= left else (lo, mid - 1)
        cost, lengths, survivors = cost_of(lo, most)
        halving = Halving(b0, gs, HALVING_SEEDS, lengths, survivors, outcome, eval_prompts, cost)
        break
    if halving is None:
        skipped["halving"] = (
            f"the {left} completions left do not pay for {len(gs)} G x {HALVING_SEEDS} seeds x {shortest} "
            f"{'steps' if outcome else 'draws'} at B = {b0}"
        )
    return AnswerPlan(x, grid, probe, pilot, halving, skipped)

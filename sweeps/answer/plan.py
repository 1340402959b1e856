"""`groupscale answer`'s plan: how a budget of sampled completions is split among its stages (torch-free).

The stages (the probe, the pilot, the halving) are described in sweeps.answer.combine and priced in
sweeps.answer.cost; ``plan_answer`` fits them into a budget (a method's ``shares``) and says which it skips and why.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass

from sweeps.answer.cost import DEFAULT_FRACTION, eval_completions, grid_cost, halving_cost, trial_cost
from sweeps.answer.rivals import TRL_DEFAULT_G
from sweeps.spec import SweepSpec

SHARES = {"probe": 0.3, "pilot": 0.2, "halving": 0.5}  # of the budget; a stage that cannot run leaves its share to the next
HALVING_SEEDS = 2  # seeds per G on the halving's rungs: the seed noise that g_matters is judged against
MIN_TRAIN_STEPS = 2  # a pilot or rung shorter than this is not run
MIN_DRAWS = 4  # a gradient_mse rung of fewer draws is not run
MIN_PROBE_PROMPTS = 8
PILOT_PROBE_PROMPTS = 64  # K of each of the pilot's probes, at most
ANSWER_EVAL_PROMPTS = 32  # held-out prompts of the answer's evals (at most the spec's; the same for every G: paired)


class BudgetTooSmall(ValueError):
    """The budget does not pay for the smallest probe."""


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
    probe: Probe  # each of the pilot's probes
    probes: int  # how many, at steps/probes, 2 steps/probes, ..., steps
    eval_prompts: int
    cost: int

    @property
    def probe_steps(self) -> tuple[int, ...]:
        every = self.steps // self.probes
        return tuple(every * (i + 1) for i in range(self.probes))


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


def _plan_pilot(
    spec: SweepSpec, x: int, fraction: float, probe: Probe, pilot_probes: int, pilot_probe_prompts: int, pilot_budget_share: float
) -> tuple[Pilot | None, str]:
    """The pilot that ``fraction`` of ``x`` completions pays for (its probes take half of it at most, each of at most
    pilot_probe_prompts prompts), or None and why not."""
    m, b0, share = probe.completions, min(spec.samples_per_step), int(fraction * x)
    eval_prompts = min(spec.eval.prompts, ANSWER_EVAL_PROMPTS)
    evals = eval_completions(spec, eval_prompts)
    pilot_g = min(spec.group_sizes, key=lambda g: (abs(math.log(g / TRL_DEFAULT_G)), g))
    pprobe = Probe(max(MIN_PROBE_PROMPTS, min(pilot_probe_prompts, probe.prompts, share // 2 // pilot_probes // m)), m)
    allowance = share - pilot_probes * pprobe.cost - 2 * evals
    # the pilot's B: the smallest budget's, or a share of it (whole groups of pilot_g) to train further for the same
    # completions; G* does not depend on B (the law), so the policy it probes moves as the grid's trials' do
    b_pilot = max(pilot_g, int(pilot_budget_share * b0) // pilot_g * pilot_g)
    steps = min(spec.steps, allowance // b_pilot) if allowance > 0 else 0
    steps -= steps % pilot_probes  # probes at whole multiples of steps / pilot_probes
    need = max(MIN_TRAIN_STEPS, pilot_probes)
    if steps < need:
        probes = f"{pilot_probes} probe{'s' if pilot_probes > 1 else ''} of {pprobe.cost}"
        trains = f"{max(allowance, 0)} for training ({steps} steps at B = {b_pilot}"
        trains += f", in whole multiples of its {pilot_probes} probes)" if pilot_probes > 1 else ")"
        return None, (
            f"its {fraction:.0%} of the budget, {share} completions, leaves {trains} after {probes} and 2 evals of "
            f"{evals}: fewer than the {need} steps a pilot needs"
        )
    cost = trial_cost(spec, steps, b_pilot, 2, eval_prompts) + pilot_probes * pprobe.cost
    return Pilot(pilot_g, b_pilot, steps, pprobe, pilot_probes, eval_prompts, cost), ""


def _halved(spec: SweepSpec) -> tuple[int, ...]:
    """The group sizes the halving races: the spec's that divide its smallest budget."""
    b0 = min(spec.samples_per_step)
    return tuple(sorted(g for g in spec.group_sizes if b0 % g == 0))


def _plan_halving(spec: SweepSpec, left: int, eval_prompts: int) -> Halving | None:
    """The halving that ``left`` completions pay for: as many rungs as fit, then the longest first rung that fits; None
    when none does."""
    b0, gs, outcome = min(spec.samples_per_step), _halved(spec), spec.measure.kind == "outcome"
    cap = spec.steps if outcome else spec.measure.repeats
    shortest = MIN_TRAIN_STEPS if outcome else MIN_DRAWS

    def cost_of(first: int, most: int) -> tuple[int, tuple[int, ...], tuple[int, ...]]:
        lengths, survivors = _rungs(first, cap, len(gs), most)
        return halving_cost(spec, len(gs), HALVING_SEEDS, lengths, b0, outcome, eval_prompts), lengths, survivors

    for most in range(len(gs), 0, -1):
        if cost_of(shortest, most)[0] > left:
            continue
        lo, hi = shortest, cap  # the cost grows with the first rung's length: bisect (T may be 10^6 steps)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if cost_of(mid, most)[0] <= left else (lo, mid - 1)
        cost, lengths, survivors = cost_of(lo, most)
        return Halving(b0, gs, HALVING_SEEDS, lengths, survivors, outcome, eval_prompts, cost)
    return None


def plan_answer(
    spec: SweepSpec,
    budget: int | None = None,
    *,
    shares: Mapping[str, float] = SHARES,
    pilot_probes: int = 1,
    pilot_probe_prompts: int = PILOT_PROBE_PROMPTS,
    pilot_budget_share: float = 1.0,
) -> AnswerPlan:
    """Split ``budget`` completions (default spec.answer.budget, else DEFAULT_FRACTION of grid_cost) over
    the probe, the pilot and the halving (``shares``; a stage that does not fit passes its share on). The pilot
    probes its policy ``pilot_probes`` times, evenly over its steps (the last at its last step), and trains at
    ``pilot_budget_share`` of the smallest budget B (rounded down to whole groups).

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

    def split(y: int) -> AnswerPlan:
        return _split(spec, y, grid, shares, pilot_probes, pilot_probe_prompts, pilot_budget_share)

    plan = split(x)
    skipped = dict(plan.skipped)
    for stage in plan.skipped:
        if stage == "pilot" and spec.measure.kind != "outcome":
            continue  # no budget trains a policy that gradient_mse never trains
        need = _smallest_budget(lambda y: stage not in split(y).skipped, x, grid)  # noqa: B023 (called here, in the loop)
        skipped[stage] += (
            f"; a budget of {need} completions ({need / grid:.2%} of the grid) would run it: --budget {need}"
            if need is not None
            else f"; no budget up to the grid's {grid} completions runs it"
        )
    return AnswerPlan(x, grid, plan.probe, plan.pilot, plan.halving, skipped)


def _smallest_budget(runs: Callable[[int], bool], above: int, most: int) -> int | None:
    """A budget in (above, most] at which ``runs`` holds and one completion fewer it does not (bisection between
    ``above``, where it does not, and ``most``), or None when even ``most`` does not: the smallest such budget
    where, as with the stages' shares, a larger budget runs what a smaller one does."""
    if most <= above or not runs(most):
        return None
    lo, hi = above, most  # runs(lo) is False, runs(hi) is True
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if runs(mid) else (mid, hi)
    return hi


def _split(
    spec: SweepSpec,
    x: int,
    grid: int,
    shares: Mapping[str, float],
    pilot_probes: int,
    pilot_probe_prompts: int,
    pilot_budget_share: float,
) -> AnswerPlan:
    """plan_answer's split of ``x`` completions, each skipped stage with why (without the budget it would need)."""
    m = spec.probe.completions
    probe = Probe(min(spec.probe.prompts, max(MIN_PROBE_PROMPTS, int(shares["probe"] * x) // m)), m)
    left, skipped = x - probe.cost, {}
    outcome = spec.measure.kind == "outcome"
    eval_prompts = min(spec.eval.prompts, ANSWER_EVAL_PROMPTS)
    pilot, why = None, "measure gradient_mse: the policy does not train, so it has no drift to show"
    if outcome:
        pilot, why = _plan_pilot(spec, x, shares["pilot"], probe, pilot_probes, pilot_probe_prompts, pilot_budget_share)
    if pilot is None:
        skipped["pilot"] = why
    else:
        left -= pilot.cost
    halving = _plan_halving(spec, left, eval_prompts)
    if halving is None:
        skipped["halving"] = _no_halving(spec, left, probe, pilot, eval_prompts)
    return AnswerPlan(x, grid, probe, pilot, halving, skipped)


def _no_halving(spec: SweepSpec, left: int, probe: Probe, pilot: Pilot | None, eval_prompts: int) -> str:
    """Why no halving runs, counting every stage: what the probe and the pilot took and what the smallest halving
    (one rung of the shortest length, its evals included) costs."""
    outcome, b0, n = spec.measure.kind == "outcome", min(spec.samples_per_step), len(_halved(spec))
    shortest = MIN_TRAIN_STEPS if outcome else MIN_DRAWS
    smallest = halving_cost(spec, n, HALVING_SEEDS, (shortest,), b0, outcome, eval_prompts)
    taken = f"the probe ({probe.cost})" + (f" and the pilot ({pilot.cost})" if pilot else "")
    evals = f" with 2 evals of {eval_completions(spec, eval_prompts)} each" if outcome else ""
    return (
        f"the {left} completions left after {taken} do not pay for the smallest halving: {n} G x {HALVING_SEEDS} seeds "
        f"x {shortest} {'steps' if outcome else 'draws'} at B = {b0}{evals}, {smallest} completions"
    )

"""Expands a sweep spec into trials: one per (G, B, seed), all with the same steps T."""

from __future__ import annotations

from dataclasses import dataclass

from sweeps.spec import SweepSpec


def prompts_per_step(samples_per_step: int, group_size: int) -> int:
    """N = B / G prompts per optimizer step (THEORY.md's notation); the spec checks that G divides B."""
    return samples_per_step // group_size


@dataclass(frozen=True)
class TrialPlan:
    """One point of the grid.

    Attributes:
        group_size: G, completions per prompt.
        samples_per_step: B, completions per optimizer step (the budget).
        seed: trial seed (data order, sampling, initial RNG state).
        prompts_per_step: N = B / G.
    """

    group_size: int
    samples_per_step: int
    seed: int

    @property
    def prompts_per_step(self) -> int:
        return prompts_per_step(self.samples_per_step, self.group_size)

    @property
    def key(self) -> str:
        return f"G{self.group_size}-B{self.samples_per_step}-s{self.seed}"


def plan_trials(spec: SweepSpec) -> list[TrialPlan]:
    """All trials of a grid sweep, largest G first (they have the fewest prompts per step)."""
    return [
        TrialPlan(group_size=g, samples_per_step=b, seed=s)
        for b in spec.samples_per_step
        for g in sorted(spec.group_sizes, reverse=True)
        for s in spec.seeds
    ]

"""The registry of answer methods: how each splits its budget and where its point estimate of G* comes from.

Every method runs the same three stages (sweeps.answer.combine: probe, pilot, halving; workers.answers runs them)
and is read by the same ``combine``; methods differ in their budget ``shares``, how often the pilot probes its
policy, and whether G* ``follow``s the policy to the spec's T (sweeps.answer.drift) or is the start probe's.
bench/calibration.py scores every method here against full grids.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from sweeps.answer.combine import combine
from sweeps.answer.plan import PILOT_PROBE_PROMPTS, SHARES, AnswerPlan, plan_answer
from sweeps.answer.result import Answer
from sweeps.spec import SweepSpec


@dataclass(frozen=True)
class AnswerMethod:
    name: str
    summary: str
    shares: Mapping[str, float] = field(default_factory=lambda: MappingProxyType(dict(SHARES)))
    pilot_probes: int = 1
    pilot_probe_prompts: int = PILOT_PROBE_PROMPTS
    pilot_budget_share: float = 1.0
    follow: bool = False

    def plan(self, spec: SweepSpec, budget: int | None = None) -> AnswerPlan:
        """sweeps.answer.plan.plan_answer with this method's shares and pilot probes (raises BudgetTooSmall)."""
        return plan_answer(
            spec,
            budget,
            shares=self.shares,
            pilot_probes=self.pilot_probes,
            pilot_probe_prompts=self.pilot_probe_prompts,
            pilot_budget_share=self.pilot_budget_share,
        )

    def combine(self, spec: SweepSpec, plan: AnswerPlan, probe: dict, pilot: dict | None, halving: dict | None,
                spent: int, seconds: float) -> Answer:  # fmt: skip
        """sweeps.answer.combine.combine as this method reads it."""
        return combine(spec, plan, probe, pilot, halving, spent, seconds, method=self.name, follow=self.follow)


METHODS: Mapping[str, AnswerMethod] = MappingProxyType(
    {
        "staged": AnswerMethod(
            "staged",
            "G* of the probe at the starting policy; a short pilot's last probe and the halving's first rung widen its "
            "interval and say whether G matters",
        ),
        "tracking": AnswerMethod(
            "tracking",
            "G* followed through training: a longer pilot at half the smallest B probed at 4 steps, log(G* - 1) "
            "against t extrapolated to the spec's T (sweeps.answer.drift), widened by the other stages where they disagree",
            shares=MappingProxyType({"probe": 0.15, "pilot": 0.75, "halving": 0.1}),
            pilot_probes=4,
            pilot_probe_prompts=64,
            pilot_budget_share=0.5,
            follow=True,
        ),
    }
)
DEFAULT_METHOD = "tracking"  # chosen on the dev half (docs/RESULTS.md, 2026-12-06): coverage, then regret


def get_method(name: str) -> AnswerMethod:
    """The registered method ``name``.

    Raises:
        ValueError: an unknown name (the message lists the registered ones).
    """
    if name not in METHODS:
        raise ValueError(f"unknown answer method {name!r}; allowed: {', '.join(METHODS)}")
    return METHODS[name]

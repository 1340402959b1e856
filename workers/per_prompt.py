"""Per-prompt G in training (``grpo.allocation: per_prompt``): the probe's pass-rate table applied to each prompt.

A trial probes its starting policy once (workers.probe: the table ``per_prompt.buckets``, one whole G per pass-rate
part; THEORY.md "Per-prompt G"), then gives each drawn prompt the G of the part its pass rate falls in, the rate
being the mean reward of every completion of that prompt the trial has trained so far (sGPO's estimate, arXiv
2606.08854); a prompt not seen yet gets the trial's group_size. Each step holds B completions exactly: prompts are
taken in their drawn order until their G fill B, the last one trimmed to what is left (or its remainder given to
the one before when fewer than 2 would be left).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from sweeps.allocation import BUCKET_EDGES, part_of
from workers.tasks import Problem


@dataclass
class PerPromptG:
    """The table, the G of unseen prompts and the pass rates seen, by Problem.key: [reward sum, completions]."""

    table: list[dict]
    unseen: int
    seen: dict[str, list[float]] = field(default_factory=dict)

    def size(self, problem: Problem) -> int:
        """The G for ``problem``: its pass-rate part's, or ``unseen`` (no completion of it trained yet, or no table)."""
        total, n = self.seen.get(problem.key, (0.0, 0.0))
        if not n or not self.table:
            return self.unseen
        lo = BUCKET_EDGES[int(part_of(total / n))]
        # a part the probe saw no prompt in has no row: the unseen prompts' G
        return next((int(row["group_size"]) for row in self.table if row["pass_rate"][0] == lo), self.unseen)

    def layout(self, drawn: list[Problem], budget: int) -> tuple[list[Problem], list[int]]:
        """The step's prompts and their G: the first of ``drawn`` whose G sum to ``budget`` (B) exactly.

        Raises:
            ValueError: ``drawn`` cannot fill the budget (fewer than budget / 2 prompts drawn).
        """
        problems, sizes, left = [], [], budget
        for p in drawn:
            if left == 0:
                break
            g = min(self.size(p), left)  # >= 2: every G is, and so is what is left
            if left - g == 1:  # one completion left would make a group of 1: this prompt takes it
                g += 1
            problems.append(p)
            sizes.append(g)
            left -= g
        if left:
            raise ValueError(f"{len(drawn)} prompts cannot fill a budget of {budget} completions (2 at least each)")
        return problems, sizes

    def update(self, problems: list[Problem], rewards: list[np.ndarray]) -> None:
        """Adds each trained group's rewards (one array a prompt) to its prompt's pass rate."""
        for p, r in zip(problems, rewards, strict=True):
            total, n = self.seen.get(p.key, (0.0, 0.0))
            self.seen[p.key] = [total + float(np.sum(r)), n + float(len(r))]

    def to_state(self) -> dict:
        """What a checkpoint keeps (from_state reads it back)."""
        return {"table": self.table, "unseen": self.unseen, "seen": self.seen}

    @staticmethod
    def from_state(state: dict) -> PerPromptG:
        return PerPromptG(state["table"], state["unseen"], {k: list(v) for k, v in state["seen"].items()})

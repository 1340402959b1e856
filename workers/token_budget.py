"""A budget in tokens (``tokens_per_step``): how many prompts each generation samples so that the trial spends Z
completion tokens a step.

docs/THEORY.md "A budget in tokens": a step of N prompts, G completions each, of mean length lbar costs N G lbar
tokens, so Z tokens a step buy N = Z / (G lbar) prompts. lbar is not known before the completions are sampled and moves
with the policy, so the rule is a controller on the cumulative spend:

- generation j (0-based; it feeds k = grpo.steps_per_generation steps) aims at the trial's cumulative target
  (j + 1) k Z: N_j = q round(((j + 1) k Z - spent) / (q G lbar)), clamped to [q, the largest multiple of q <= B / G],
  with lbar the last generation's mean completion length (the current policy's), and before any generation
  grpo.max_new_tokens, so that the first never overspends;
- q = k P (P = num_processes): every generation splits into k mini-batches of whole groups and every rank holds a
  share;
- an overspend (or a shortfall) is carried to the next generation, so the spend after j generations is within one
  generation's rounding of j k Z whenever the clamp does not bind: |spent - j k Z| < q G l_max / 2 + the last
  generation's deviation of its realised length from lbar.

B (``samples_per_step``) is then the most completions one generation may sample (its memory), not the budget.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

from sweeps.trial import TrialConfig
from workers.batch import Batch
from workers.distributed import all_sum


@dataclass
class TokenBudget:
    """The controller of one trial (module docstring); its state travels in the trial's checkpoint (to_state).

    Attributes:
        tokens_per_step: Z, completion tokens a step.
        group_size: G.
        max_prompts: B / G rounded down to a multiple of ``quantum``.
        quantum: q = k P: N is a multiple of it.
        steps_per_generation: k.
        first_length: lbar before any generation (grpo.max_new_tokens: the longest a completion can be).
        spent: completion tokens sampled so far, every rank's.
        generations: generations sampled so far.
        last_length: the last generation's mean completion length (tokens), 0 before the first.
        prompts: N of the last generation (0 before the first).
    """

    tokens_per_step: int
    group_size: int
    max_prompts: int
    quantum: int
    steps_per_generation: int
    first_length: float
    spent: float = 0.0
    generations: int = 0
    last_length: float = 0.0
    prompts: int = 0

    @classmethod
    def of(cls, cfg: TrialConfig, state: dict | None = None) -> TokenBudget | None:
        """The controller of trial config ``cfg``, restored from a checkpoint's ``state`` when given;
        None when cfg.tokens_per_step is None."""
        if cfg.tokens_per_step is None:
            return None
        k = cfg.grpo.steps_per_generation
        q = k * cfg.num_processes
        cap = max(q, cfg.prompts_per_step // q * q)
        budget = cls(cfg.tokens_per_step, cfg.group_size, cap, q, k, float(cfg.grpo.max_new_tokens))
        return budget if state is None else cls(**(asdict(budget) | state))

    def next_prompts(self) -> int:
        """N of the next generation (module docstring), a multiple of ``quantum`` in [quantum, max_prompts]."""
        length = self.last_length if self.generations else self.first_length
        debt = (self.generations + 1) * self.steps_per_generation * self.tokens_per_step - self.spent
        units = round(debt / (self.quantum * self.group_size * max(length, 1e-9)))
        self.prompts = min(self.max_prompts, self.quantum * max(1, units))
        return self.prompts

    def sized(self, cfg: TrialConfig) -> TrialConfig:
        """Trial config ``cfg`` with B = N G, N the next generation's prompts (next_prompts): what it samples."""
        return replace(cfg, samples_per_step=self.next_prompts() * cfg.group_size)

    def record_batch(self, batch: Batch) -> dict[str, float]:
        """record of this rank's share of a generation: its completion tokens (completion_mask's sum), its completions."""
        return self.record(float(batch.rollout.completion_mask.sum()), batch.rewards.numel())

    def record(self, tokens: float, completions: int) -> dict[str, float]:
        """Counts a generation this rank sampled: its ``tokens`` completion tokens over ``completions`` completions
        (summed over the ranks here). Returns its metrics: ``token_budget/prompts`` (N), ``token_budget/completion_tokens``
        (its tokens) and ``token_budget/spent_share`` (tokens spent so far over the target (j + 1) k Z)."""
        tokens, completions = all_sum([float(tokens), float(completions)])
        self.spent += tokens
        self.generations += 1
        self.last_length = tokens / max(completions, 1.0)
        target = self.generations * self.steps_per_generation * self.tokens_per_step
        return {
            "token_budget/prompts": float(self.prompts),
            "token_budget/completion_tokens": tokens,
            "token_budget/spent_share": self.spent / target,
        }

    def to_state(self) -> dict:
        """What a resume needs (the counts; the settings come from the config again)."""
        return {"spent": self.spent, "generations": self.generations, "last_length": self.last_length, "prompts": self.prompts}


def at_budget(cfg: TrialConfig, samples_per_step: int) -> int | None:
    """cfg.tokens_per_step for a trial of ``samples_per_step`` (B') in place of cfg's B: Z B' / B rounded, at least 1, so
    that a stage of an answer at a share of B (its pilot) trains the same share of its cap; None without a token budget.
    (The law's G* does not depend on the budget: docs/THEORY.md "A budget in tokens".)"""
    if cfg.tokens_per_step is None:
        return None
    return max(1, round(cfg.tokens_per_step * samples_per_step / cfg.samples_per_step))

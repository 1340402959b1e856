"""The variance components of the GRPO batch gradient and what follows from them: G* and the predicted MSE.

For the leave-one-out advantage at group size G and budget B (N = B / G prompts; THEORY.md, "The variance law"):

    E||g_hat - g||^2 = (tau2 G + sigma2 + kappa / (G - 1)) / B,     G* = 1 + sqrt(kappa / tau2)

tau2: variance over prompts of the per-prompt gradient mean; sigma2: within-prompt variance of one
completion's score term; kappa: the excess variance of the leave-one-out baseline (units: squared
gradient norm). The probe estimates them (workers.probe); the bandit knows them exactly
(workers.tasks.bandit).
"""

from __future__ import annotations

from dataclasses import dataclass

from sweeps.fit.curve import g_star_of


@dataclass(frozen=True)
class VarianceComponents:
    tau2: float
    sigma2: float
    kappa: float

    @property
    def g_star(self) -> float:
        """1 + sqrt(kappa / tau2); inf when tau2 <= 0 (larger G always better), 1 when kappa <= 0."""
        return g_star_of(self.tau2, self.kappa)

    def gradient_mse(self, group_size: float, samples_per_step: float) -> float:
        """The law's E||g_hat - g||^2 at (G, B). Raises ValueError for G < 2 (no leave-one-out baseline)."""
        g = group_size
        if g < 2:
            raise ValueError(f"group_size (G) must be >= 2, got {g}")
        return (self.tau2 * g + self.sigma2 + self.kappa / (g - 1)) / samples_per_step

"""The ``bandit`` task: a tabular softmax contextual bandit with exact ground truth.

M contexts (uniform), K arms, Bernoulli rewards with success rates p[x, a]. Built from
numpy ``default_rng(seed)``: logits = rng.normal(0, 1, (M, K)), then p = rng.uniform(0, 1, (M, K))**2
(THEORY.md's check instance with M=20, K=6, seed=0). The policy is ``model: {preset: tabular}``,
pi(a | x) = softmax(theta_x / T), started at those logits.

Exact variance components of the policy gradient by enumeration (THEORY.md, "The variance law";
Zhou et al., arXiv 2603.01162): with s(a) = (e_a - pi)/T in row x of theta and V = sum_a pi_a p_a,
    g_x     = sum_a pi_a p_a s(a)
    sigma2  = E_x tr Cov((r - V) s)
    zeta2_x = E||h||^2 - ||g_x||^2,  h(z, z') = (r - r')(s - s')/2,  kappa = E_x (2 zeta2_x - sigma2_x)
    tau2    = tr Cov_x(g_x)
    MSE(G; B) = (tau2 G + sigma2 + kappa / (G - 1)) / B,   G* = 1 + sqrt(kappa / tau2)
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
from scipy.special import softmax

from sweeps.allocation import PromptComponents
from sweeps.components import VarianceComponents
from sweeps.dynamic_sampling import FilteredLaw
from workers.models.tabular import TabularPolicy
from workers.tasks.base import ExactTask, Problem


def exact_prompt_components(logits: np.ndarray, p: np.ndarray, temperature: float = 1.0) -> PromptComponents:
    """Enumerate tau2 and each context's sigma2_x, kappa_x and pass rate V(x) for the softmax policy ``logits``
    (M, K) and success rates p (M, K); contexts are uniform (sweeps.allocation: the per-prompt law)."""
    m, k = logits.shape
    pi = softmax(logits / temperature, axis=1)  # (M, K) pi(a | x), row by row
    grads = np.zeros((m, k))
    sigma2, kappa, value = np.zeros(m), np.zeros(m), np.zeros(m)
    off_diag = 1.0 - np.eye(k)
    for x in range(m):
        pa, px = pi[x], p[x]
        v = value[x] = pa @ px
        s = (np.eye(k) - pa) / temperature  # row a: score of arm a
        g = (pa * px) @ s
        s_norm2 = (s**2).sum(axis=1)
        e_var = (pa * (px * (1 - v) ** 2 + (1 - px) * v**2) * s_norm2).sum()  # E||(r - V) s||^2
        sigma2[x] = e_var - g @ g
        # E||h||^2 = 1/4 sum_{a,b} pi_a pi_b E[(r_a - r_b)^2] ||s(a) - s(b)||^2, ||s(a) - s(b)||^2 = 2/T^2 (a != b)
        pair = px[:, None] + px[None, :] - 2 * px[:, None] * px[None, :]
        e_h2 = 0.25 * (pa[:, None] * pa[None, :] * pair * off_diag).sum() * 2 / temperature**2
        kappa[x] = 2 * (e_h2 - g @ g) - sigma2[x]
        grads[x] = g
    # g_x is embedded in row x of an (M, K) parameter, so rows of different contexts are orthogonal.
    tau2 = (grads**2).sum(axis=1).mean() - ((grads / m) ** 2).sum()
    return PromptComponents.of(tau2, sigma2, kappa, value)


def exact_components(logits: np.ndarray, p: np.ndarray, temperature: float = 1.0) -> VarianceComponents:
    """Enumerate tau2, sigma2, kappa for the softmax policy ``logits`` (M, K) and success rates p (M, K)."""
    c = exact_prompt_components(logits, p, temperature)
    return VarianceComponents(tau2=c.tau2, sigma2=float(c.weight @ c.sigma2), kappa=float(c.weight @ c.kappa))


def exact_filtered_law(logits: np.ndarray, p: np.ndarray, temperature: float = 1.0) -> FilteredLaw:
    """The law's terms with ||g||^2 and the pass rates V(x), for the law under dynamic sampling
    (sweeps.dynamic_sampling). g's row x is w_x g_x = pi_x (p_x - V(x)) / (M T): the contexts' rows are orthogonal."""
    c = exact_prompt_components(logits, p, temperature)
    rows = softmax(logits / temperature, axis=1) * (p - c.pass_rate[:, None]) / temperature * c.weight[:, None]
    law = VarianceComponents(tau2=c.tau2, sigma2=float(c.weight @ c.sigma2), kappa=float(c.weight @ c.kappa))
    return FilteredLaw(law, float((rows**2).sum()), c.pass_rate, c.weight)


@dataclass(frozen=True)
class BanditTask(ExactTask):
    contexts: int = 20
    arms: int = 6
    seed: int = 0
    name: str = "bandit"
    _tables: tuple[np.ndarray, np.ndarray] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        rng = np.random.default_rng(self.seed)
        logits = rng.normal(0.0, 1.0, (self.contexts, self.arms))
        p = rng.uniform(0.0, 1.0, (self.contexts, self.arms)) ** 2
        object.__setattr__(self, "_tables", (logits, p))

    @property
    def initial_logits(self) -> np.ndarray:
        return self._tables[0].copy()

    @property
    def success_rates(self) -> np.ndarray:
        return self._tables[1].copy()

    def exact_components(self, logits: np.ndarray | None = None, temperature: float = 1.0) -> VarianceComponents:
        return exact_components(self.initial_logits if logits is None else logits, self._tables[1], temperature)

    def exact_prompt_components(self, logits: np.ndarray | None = None, temperature: float = 1.0) -> PromptComponents:
        """Each context's terms of the law at ``logits`` (default: the starting policy's): the per-prompt check."""
        return exact_prompt_components(self.initial_logits if logits is None else logits, self._tables[1], temperature)

    def exact_filtered_law(self, logits: np.ndarray | None = None, temperature: float = 1.0) -> FilteredLaw:
        """The law under dynamic sampling at ``logits`` (default: the starting policy's)."""
        return exact_filtered_law(self.initial_logits if logits is None else logits, self._tables[1], temperature)

    def sample_train(self, n: int, rng: np.random.Generator) -> list[Problem]:
        return [Problem(str(int(x)), "") for x in rng.integers(0, self.contexts, size=n)]

    def eval_problems(self, n: int) -> list[Problem]:
        """Every context once: the exact expectation over the uniform context distribution (n is ignored)."""
        return [Problem(str(x), "") for x in range(self.contexts)]

    def train_support(self) -> tuple[list[Problem], np.ndarray]:
        return self.eval_problems(0), np.full(self.contexts, 1.0 / self.contexts)

    def rewards(
        self,
        problems: list[Problem],
        completions: list[str],
        rng: np.random.Generator,
        completion_ids: list[list[int]] | None = None,
    ) -> np.ndarray:
        p = self._tables[1][[int(q.prompt) for q in problems], [int(c) for c in completions]]
        return (rng.random(len(problems)) < p).astype(np.float32)

    def expected_reward(self, policy, problems: list[Problem], *, max_new_tokens: int, temperature: float) -> torch.Tensor:
        """V(x) = sum_a pi(a|x) p[x, a], exact and differentiable. Needs the tabular policy."""

        if not isinstance(policy, TabularPolicy):
            raise ValueError("the bandit task needs model: {preset: tabular}")
        ctx = torch.tensor([int(q.prompt) for q in problems])
        return (policy.probs(ctx, temperature) * torch.as_tensor(self._tables[1], dtype=torch.float32)[ctx]).sum(dim=1)

    def max_reward(self, problems: list[Problem]) -> np.ndarray:
        return self._tables[1][[int(q.prompt) for q in problems]].max(axis=1)

    def vocabulary(self) -> str:
        return "0123456789"

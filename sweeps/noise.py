"""The noise model of a sweep metric: per-seed variance var = exp(alpha) |mean|^beta, fitted across points.

With a few seeds per point, each point's own variance is itself very noisy (2 degrees of freedom with
3 seeds), so both the law fit's weights (sweeps.fit) and the adaptive design's information matrix
(sweeps.adaptive) use one variance function fitted across all points instead: log var regressed on
log |mean|, weighted by the degrees of freedom (seeds - 1), beta clipped to [0, 2] (from constant to
multiplicative noise). With fewer than 3 usable points, or no spread in |mean|, beta = 0 and the
variance is the dof-weighted pooled variance.
"""

from __future__ import annotations

import math

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

TINY = 1e-12  # variances and |means| at or below this carry no information about the noise's shape


class NoiseModel(BaseModel):
    """var(mean) = exp(alpha) * |mean|^beta, per seed (metric units squared)."""

    model_config = ConfigDict(frozen=True)
    alpha: float = Field(description="log of the per-seed variance at |mean| = 1 (metric units)")
    beta: float = Field(description="power of |mean| in [0, 2]: 0 constant noise, 2 multiplicative")

    def in_units(self, scale: float) -> NoiseModel:
        """The model of the metric multiplied by ``scale`` (> 0): var and mean scale by scale^2 and scale."""
        return NoiseModel(alpha=self.alpha + (2.0 - self.beta) * math.log(scale), beta=self.beta)

    def variance(self, mean: np.ndarray | float) -> np.ndarray:
        """(P,) or scalar means -> per-seed variances of the same shape."""
        return np.exp(self.alpha + self.beta * np.log(np.maximum(np.abs(mean), TINY)))


CONSTANT = NoiseModel(alpha=0.0, beta=0.0)  # unit variance everywhere: no replicate says anything about the noise yet


def fit_noise(means: np.ndarray, variances: np.ndarray, dof: np.ndarray) -> NoiseModel | None:
    """The noise model from per-point means (P,), sample variances over seeds (P,) (nan: one seed) and
    degrees of freedom (P,) (seeds - 1). None when no point has a usable variance."""
    means, variances, dof = (np.asarray(a, dtype=float) for a in (means, variances, dof))
    ok = np.isfinite(variances) & (variances > TINY) & (np.abs(means) > TINY)
    if not ok.any():
        return None
    lv, lm, w = np.log(variances[ok]), np.log(np.abs(means[ok])), dof[ok]
    if ok.sum() >= 3 and np.ptp(lm) > 1e-6:
        x = np.stack([np.ones(lm.size), lm], axis=1)
        sw = np.sqrt(w)
        beta = float(np.clip(np.linalg.lstsq(x * sw[:, None], lv * sw, rcond=None)[0][1], 0.0, 2.0))
        return NoiseModel(alpha=float(np.average(lv - beta * lm, weights=w)), beta=beta)
    return NoiseModel(alpha=math.log(float((variances[ok] * w).sum() / w.sum())), beta=0.0)


def replicate_stats(groups: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(means, sample variances with ddof 1 (nan for one value), dof) of each group of per-seed values."""
    means = np.array([v.mean() for v in groups])
    var = np.array([v.var(ddof=1) if v.size > 1 else np.nan for v in groups])
    return means, var, np.array([v.size - 1.0 for v in groups])

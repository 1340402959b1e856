"""Hand-made points and tables shared by the tests of sweeps.fit (not a test module)."""

import numpy as np

from sweeps.fit.budget import fit_budget
from sweeps.fit.points import Points, aggregate_all
from sweeps.fit.universality import universality

GRID = [2, 3, 4, 6, 8, 12, 16]


NAN7 = np.full(7, np.nan)


def points(g, values, sd=None):
    """A budget's Points from per-seed values by hand; weights 1 / sqrt(sd^2 / n) from per-seed sds (unit sd: w = sqrt(n))."""
    values = tuple(np.asarray(v, dtype=float) for v in values)
    n = np.array([v.size for v in values])
    sd = np.ones(n.size) if sd is None else np.asarray(sd, dtype=float)
    nan = np.full(n.size, np.nan)
    return Points(np.asarray(g, dtype=float), np.array([v.mean() for v in values]), nan, n, np.sqrt(n) / sd, values, nan)


def table(laws, seeds=3, noise=0.03, rng_seed=0):
    """Columns (g, b, y) of ``seeds`` trials per G in GRID at each budget B of ``laws`` {B: gap(G)}, relative noise."""
    rng = np.random.default_rng(rng_seed)
    rows = [(g, b, f(g) * (1 + noise * rng.standard_normal())) for b, f in laws.items() for g in GRID for _ in range(seeds)]
    g, b, y = (np.array(c) for c in zip(*rows))
    return g.astype(float), b, y


def aggregate(laws, **kw):
    g, b, y = table(laws, **kw)
    return aggregate_all(g, b, y, np.full(g.size, np.nan))[0]


def wls(x, y, w):
    """Weighted least squares by numpy: (coefficients, sum w^2 (y - x coef)^2)."""
    coef = np.linalg.lstsq(x * w[:, None], y * w, rcond=None)[0]
    return coef, float((w**2 * (y - x @ coef) ** 2).sum())


def flat_rss(y, w):
    """sum w^2 (y - ybar)^2 with the weighted mean ybar (weights w^2)."""
    return float((w**2 * (y - (w**2 @ y) / (w**2).sum()) ** 2).sum())


UNIVERSAL = {48: lambda g: 0.2 + 0.01 * g + 0.09 / (g - 1), 96: lambda g: 0.1 + 0.005 * g + 0.045 / (g - 1)}  # G* = 4 at both


def universality_of(data):
    """The Universality of aggregated points (each budget fitted first), as fit_law computes it."""
    return universality([fit_budget(k, p) for k, p in data.items()], data)

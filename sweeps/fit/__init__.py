"""Fitting the optimal-group-size law to sweep results (THEORY.md "The law", "Fitting rules", "Evidence and units").

Source: Zhou et al., "Demystifying Group Relative Policy Optimization: Its Policy Gradient is a
U-Statistic", arXiv 2603.01162 (2026). One concern per module:

    curve         the law a + b G + c/(G-1), G* = 1 + sqrt(c/b), the recommended integer G, the constrained fit
    points        rows -> seed-averaged points per budget, weighted by the noise model (sweeps.noise)
    budget        the law at one budget B, and G* against the grid's edges
    universality  one G* across budgets (shared rho, F-test) and the overall G*
    bootstrap     the interval of G* and the group sizes the resamples cannot tell apart
    evidence      strong, weak or none, and why
    law           fit_law: rows in, one LawFit out, built once
    result        the result types the API serves
"""

from sweeps.fit.bootstrap import percentile_or_inf
from sweeps.fit.curve import g_star_of, law_curve, recommend_group_size, tie_set
from sweeps.fit.law import fit_law
from sweeps.fit.result import BudgetFit, Evidence, FitStatus, LawFit, StepFit, TimeUniversality, Universality

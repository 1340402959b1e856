"""service.results.fit_from_trials: only succeeded trials are data points."""

import pytest

from service.lifecycle import TrialStatus
from service.results import fit_from_trials
from service.store import Trial
from sweeps.fit import fit_law
from sweeps.spec import SweepSpec
from tests.factories import spec

GRID = [2, 3, 4, 6, 8, 12, 16]
SPEC = SweepSpec.model_validate(spec(name="s", group_sizes=GRID, samples_per_step=[48], seeds=[0, 1]))


def _trial(g, seed, status, gap):
    return Trial(group_size=g, samples_per_step=48, seed=seed, status=status, metrics={"gap": gap})


def test_failed_and_no_signal_trials_are_left_out_of_the_fit():
    done = [_trial(g, s, TrialStatus.SUCCEEDED, 0.2 + 0.01 * g + 0.09 / (g - 1) + 0.002 * s) for g in GRID for s in (0, 1)]
    # values that would move the fit a long way if they were used
    excluded = [_trial(2, 2, TrialStatus.FAILED, 50.0), _trial(16, 2, TrialStatus.NO_SIGNAL, 0.0)]
    pending = [_trial(8, 2, TrialStatus.RUNNING, 9.0)]
    fit = fit_from_trials(done + excluded + pending, SPEC, n_boot=50)
    own = fit_law(
        [t.group_size for t in done], [48] * len(done), [t.seed for t in done], [t.metrics["gap"] for t in done], n_boot=50
    )
    assert fit.g_star == pytest.approx(own.g_star) and fit.g_star == pytest.approx(4.0, abs=0.1)
    assert fit.n_rows == len(done) and fit.message.endswith("(2 no_signal/failed trials excluded)")
    only_no_signal = fit_from_trials([_trial(2, 0, TrialStatus.NO_SIGNAL, 0.1)], SPEC)
    assert only_no_signal.status == "no_signal" and only_no_signal.g_star is None

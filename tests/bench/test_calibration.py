"""bench/calibration.py's quick suite: `groupscale answer` covers each bandit's exact G* (THEORY.md's formula), and
the scoring rules (coverage, regret as a share of the grid's spread) by hand."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import calibration  # noqa: E402

BANDITS = [name for name, (spec, exact) in calibration.TASKS.items() if exact is not None]


def test_the_suites_bandits_spread_their_exact_g_star_over_2_to_16():
    exact = sorted(calibration.TASKS[name][1] for name in BANDITS)
    assert exact[0] < 4 and exact[-1] > 14 and len(calibration.TASKS) >= 5
    from workers.tasks.bandit import BanditTask

    for name in BANDITS:  # the stated exact G* is the one the task's own enumeration gives
        spec = calibration.task_spec(name, quick=True)
        task = BanditTask(spec.task.contexts, spec.task.arms, spec.task.seed)
        exact = task.exact_components(temperature=spec.grpo.temperature).g_star
        assert exact == pytest.approx(calibration.TASKS[name][1], abs=0.01)


@pytest.mark.parametrize("name", BANDITS)
def test_the_answer_covers_each_bandits_exact_g_star_on_the_quick_suite(name, tmp_path):
    from workers.answer import run_answer

    spec = calibration.task_spec(name, quick=True)
    out = run_answer(spec, tmp_path)
    lo, hi = out["g_star_ci95"]
    assert lo <= calibration.TASKS[name][1] <= hi
    assert out["cost"]["completions"] <= round(0.01 * calibration.grid_cost(spec))  # the default budget: 1% of the grid


def test_coverage_and_regret_by_hand():
    ref = {"g_star": 4.2, "tie_set": [4, 6], "means": {"2": 0.9, "4": 0.5, "6": 0.6, "16": 1.3}, "best": 4}
    assert calibration.covers({"recommended": 16, "ci95": [3.0, 5.0]}, ref)  # the interval holds G*
    assert calibration.covers({"recommended": 6, "ci95": [7.0, 9.0]}, ref)  # G in the tie set
    assert not calibration.covers({"recommended": 2, "ci95": [1.5, 2.5]}, ref)
    assert not calibration.covers({"recommended": None, "ci95": None}, ref)
    assert calibration.regret({"recommended": 2}, ref) == pytest.approx((0.9 - 0.5) / (1.3 - 0.5))
    assert calibration.regret({"recommended": 5}, ref) == pytest.approx(0.1 / 0.8)  # nearest grid G in log: 6
    assert calibration.regret({"recommended": 12}, ref) == pytest.approx(1.0)  # nearest in log is 16

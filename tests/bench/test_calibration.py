"""bench/calibration.py's suite: a split fixed in the file, each bandit's stated exact G* its enumeration's, the
default method covering the bandits' exact G* on the quick suite, and the scoring rules by hand."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import calibration  # noqa: E402

BANDITS = [name for name, t in calibration.TASKS.items() if t.exact is not None and t.spec.get("steps") == 1]


def test_the_suite_is_split_and_covers_each_kind_of_task_the_issue_names():
    halves = {h: [n for n, t in calibration.TASKS.items() if t.half == h] for h in calibration.HALVES}
    assert len(calibration.TASKS) >= 12 and all(len(v) >= 6 for v in halves.values())
    whats = " ".join(t.what for t in calibration.TASKS.values())
    for kind in ("near 2", "near 10", "above 24", "beyond the grid", "flat", "moving with training", "chat"):
        assert kind in whats, kind
    exact = sorted(calibration.TASKS[n].exact for n in BANDITS)
    assert exact[0] < 3 and exact[-1] > 40


def test_each_stated_exact_g_star_is_the_tasks_own_enumeration():
    from workers.tasks.bandit import BanditTask

    for name, t in calibration.TASKS.items():
        if t.exact is None:
            continue
        spec = calibration.task_spec(name, quick=True)
        task = BanditTask(spec.task.contexts, spec.task.arms, spec.task.seed)
        assert task.exact_components(temperature=spec.grpo.temperature).g_star == pytest.approx(t.exact, abs=0.01), name


@pytest.mark.parametrize("name", ["bandit-g3", "bandit-g10"])
def test_the_default_answer_covers_a_bandits_exact_g_star_on_the_quick_suite(name, tmp_path):
    from workers.answers import run_answer

    spec = calibration.task_spec(name, quick=True)
    out = run_answer(spec, tmp_path)
    lo, hi = out.g_star_ci95
    assert lo <= calibration.TASKS[name].exact <= (hi if hi is not None else float("inf"))
    assert out.cost.completions <= round(0.01 * calibration.grid_cost(spec))  # the default budget: 1% of the grid


def test_a_keep_or_move_decision_is_covered_as_its_estimate_and_scored_through_the_g_it_says_to_use():
    from types import SimpleNamespace

    ref = {"g_star": 4.2, "tie_set": [4, 6], "means": {"4": 0.5, "8": 0.7, "16": 1.3}, "best": 4}
    run = {"recommended": 4, "ci95": [3.0, 5.0], "evidence": "strong", "cost": 10}
    keep = SimpleNamespace(baseline=SimpleNamespace(action="keep", use_group_size=8))
    kept = calibration.keep_or_move_run(keep, run)
    assert kept["recommended"] == 8 and calibration.covers(kept, ref) and not calibration.confident_miss(kept, ref)
    assert calibration.regret(kept, ref) == pytest.approx(0.2 / 0.8) and kept["cost"] == 10
    wrong = calibration.keep_or_move_run(keep, {**run, "ci95": [9.0, 12.0], "recommended": 12})
    assert not calibration.covers(wrong, ref) and calibration.confident_miss(wrong, ref)  # the estimate missed, strong
    move = SimpleNamespace(baseline=SimpleNamespace(action="move", use_group_size=6))
    moved = calibration.keep_or_move_run(move, {**run, "ci95": [9.0, 12.0], "recommended": 12})
    assert moved["recommended"] == 6 and not calibration.covers(moved, ref)  # its G in the tie set: not the estimate's
    assert calibration.decided("staged") == "staged+keep"


def test_coverage_regret_and_confident_misses_by_hand():
    ref = {"g_star": 4.2, "tie_set": [4, 6], "means": {"2": 0.9, "4": 0.5, "6": 0.6, "16": 1.3}, "best": 4}
    assert calibration.covers({"recommended": 16, "ci95": [3.0, 5.0]}, ref)  # the interval holds G*
    assert not calibration.covers({"recommended": 16, "ci95": [3.0, None]}, ref)  # open above: only its G counts
    assert not calibration.covers({"recommended": 16, "ci95": [1.0, None]}, ref)  # [1, open) says nothing
    assert calibration.covers({"recommended": 6, "ci95": [5.0, None]}, ref)  # through its G
    assert calibration.covers({"recommended": 6, "ci95": [7.0, 9.0]}, ref)  # G in the tie set
    assert not calibration.covers({"recommended": 2, "ci95": [1.5, 2.5]}, ref)
    assert not calibration.covers({"recommended": None, "ci95": None}, ref)
    assert calibration.confident_miss({"recommended": 2, "ci95": [1.5, 2.5], "evidence": "strong"}, ref)
    assert not calibration.confident_miss({"recommended": 2, "ci95": [1.5, 2.5], "evidence": "weak"}, ref)
    assert not calibration.confident_miss({"recommended": 4, "ci95": [3.5, 4.5], "evidence": "strong"}, ref)
    assert calibration.regret({"recommended": 2}, ref) == pytest.approx((0.9 - 0.5) / (1.3 - 0.5))
    assert calibration.regret({"recommended": 5}, ref) == pytest.approx(0.1 / 0.8)  # nearest grid G in log: 6
    assert calibration.regret({"recommended": 12}, ref) == pytest.approx(1.0)  # nearest in log is 16


def test_issue_55s_kinds_are_on_both_sides_of_the_split():
    for kind in ("epochs a generation", "k = 4", "dynamic sampling", "small budgets", "rise with training", "around the optimum"):
        halves = {t.half for t in calibration.TASKS.values() if kind in t.what}
        assert halves == set(calibration.HALVES), kind
    assert set(calibration.NEW_KINDS) <= set(calibration.TASKS)


def test_the_g_matters_checks_by_hand(monkeypatch):
    """Grids that cannot tell G apart count the runs that keep or say false; where G = 8's regret exceeds 0.1 of the
    spread, the runs that say false."""
    monkeypatch.setattr(calibration, "METHODS", ("staged",))
    flat = {"evidence": "none", "means": {"4": 0.51, "8": 0.50, "16": 0.505}, "best": 8}  # G = 8 the best: regret 0
    steep = {"evidence": "strong", "means": {"4": 0.5, "8": 0.9, "16": 1.0}, "best": 4}
    refs = {"near-b": flat, "up-b": steep}

    def run(action, matters):
        return {"staged": {"g_matters": matters}, "staged+keep": {"action": action}, "g8": {"recommended": 8}}

    runs = {"near-b": [run("keep", None), run("move", False), run("move", None)], "up-b": [run("move", False), run("move", True)]}
    (line,) = calibration.matters_lines(refs, runs)
    assert line == (
        "held-out staged: grids that cannot tell G apart: keep or g_matters false in 2/3 runs; "
        "G = 8's regret > 0.1: g_matters false in 1/2 runs"
    )

"""The learning-rate tuning phase (spec tune_lr) on the tabular bandit: search, pruning, plain result, MLflow runs.

Bandit with plain SGD (gradients clipped to norm 1): lr <= 0.1 barely moves the policy in 40 steps
(gap ~0.46, as at the start), lr in 30..100 reaches gap ~0.05; a study of 8 trials takes ~0.3 s.
"""

import json

import optuna
import pytest
from mlflow import MlflowClient

from workers.engines.groupscale import TrialConfig
from workers.entry import run_tune_lr
from workers.tune_lr import frozen_trials, n_startup, tune_learning_rate

TASK = {"name": "bandit", "contexts": 20, "arms": 6, "seed": 0}
LOW, HIGH, TRIALS, STEPS = 1e-3, 1e2, 8, 40


def bandit_cfg(**over):
    base = dict(
        task=TASK,
        model={"preset": "tabular"},
        group_size=4,
        samples_per_step=48,
        seed=0,
        steps=160,
        optimizer="sgd",
        lr=0.5,
        eval_prompts=512,
    )
    return TrialConfig.flat(**{**base, **over})


@pytest.fixture(scope="module")
def tuned():
    return tune_learning_rate(bandit_cfg(), LOW, HIGH, TRIALS, STEPS, seed=0)


def without_seconds(result):
    return [{k: v for k, v in t.items() if k != "seconds"} for t in result["trials"]]


def test_best_lr_is_in_range_and_away_from_the_bad_low_end(tuned):
    assert tuned["metric"] == "gap" and tuned["direction"] == "minimize"
    assert LOW <= tuned["best_lr"] <= HIGH
    assert tuned["best_lr"] >= 10  # lr <= 1 barely learns in 40 steps
    complete = [t for t in tuned["trials"] if t["state"] == "COMPLETE"]
    assert tuned["best_value"] == min(t["value"] for t in complete) < 0.1
    slowest = min(complete, key=lambda t: t["lr"])
    assert slowest["lr"] < 1 and slowest["value"] > 0.4  # the low end: the gap stays near its start (0.462)
    assert tuned["trials"][tuned["best_trial"]]["lr"] == tuned["best_lr"]


def test_bad_learning_rates_are_pruned_early_and_the_first_trials_never(tuned):
    trials = tuned["trials"]
    assert len(trials) == TRIALS
    pruned = [t for t in trials if t["state"] == "PRUNED"]
    assert pruned, trials
    assert all(t["lr"] < 2 and t["steps_done"] < STEPS and t["value"] is None for t in pruned)
    for t in pruned:
        assert max(t["intermediate"]) == t["steps_done"] >= STEPS // 4  # not before the warm-up quarter
    assert all(t["state"] == "COMPLETE" for t in trials[: n_startup(TRIALS)])
    assert all(set(t["intermediate"]) <= set(range(5, STEPS + 1, 5)) for t in trials)  # every steps // 8 = 5 steps
    assert all(0 <= v <= 1 for t in trials for v in t["intermediate"].values())  # 1 - mean reward


def test_result_is_plain_json_and_reproducible(tuned):
    again = tune_learning_rate(bandit_cfg(), LOW, HIGH, TRIALS, STEPS, seed=0)
    assert without_seconds(again) == without_seconds(tuned)
    assert again["best_lr"] == tuned["best_lr"] and again["best_value"] == tuned["best_value"]
    other = tune_learning_rate(bandit_cfg(), LOW, HIGH, TRIALS, STEPS, seed=1)
    assert [t["lr"] for t in other["trials"]] != [t["lr"] for t in tuned["trials"]]
    back = json.loads(json.dumps(tuned, allow_nan=False))
    assert back["best_lr"] == tuned["best_lr"] and len(back["trials"]) == TRIALS


def test_frozen_trials_fill_a_study_with_the_same_best_lr(tuned):
    study = optuna.create_study(direction=tuned["direction"])
    study.add_trials(frozen_trials(json.loads(json.dumps(tuned))))  # string step keys after JSON
    assert len(study.trials) == TRIALS
    assert study.best_params["lr"] == tuned["best_lr"] and study.best_value == tuned["best_value"]
    states = [t.state.name for t in study.trials]
    assert states == [t["state"] for t in tuned["trials"]]
    pruned = next(t for t in study.trials if t.state.name == "PRUNED")
    assert pruned.intermediate_values == tuned["trials"][pruned.number]["intermediate"]


def test_trials_without_signal_fail_and_leave_no_best_lr():
    # Bandit seed 5 at temperature 1e-3: every group repeats an arm that never pays, at any lr.
    cfg = bandit_cfg(task={"name": "bandit", "contexts": 2, "arms": 2, "seed": 5}, samples_per_step=8, temperature=1e-3)
    out = tune_learning_rate(cfg, 1e-2, 1e2, trials=3, steps=10, seed=0)
    assert [t["state"] for t in out["trials"]] == ["FAIL"] * 3
    assert all(t["reason"].startswith("no_signal: 10/10 steps without signal") and t["value"] is None for t in out["trials"])
    assert out["best_lr"] is None and out["best_value"] is None and out["best_trial"] is None
    json.dumps(out, allow_nan=False)


@pytest.mark.parametrize(
    "over, args, match",
    [
        ({"measure": "gradient_mse"}, (1e-3, 1.0), "measure outcome"),
        ({}, (1.0, 0.5), "low < high"),
        ({}, (0.0, 1.0), "low < high"),
    ],
)
def test_bad_input_fails_before_training(over, args, match):
    with pytest.raises(ValueError, match=match):
        tune_learning_rate(bandit_cfg(**over), *args, trials=2, steps=4)
    with pytest.raises(ValueError, match="valid: gap"):
        tune_learning_rate(bandit_cfg(), 1e-3, 1.0, trials=2, steps=4, metric="loss")


def test_each_lr_trial_is_a_child_run_of_the_sweep_in_mlflow(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri)
    exp = client.create_experiment("groupscale/bandit", artifact_location=(tmp_path / "artifacts").as_uri())
    parent = client.create_run(exp, run_name="sweep", tags={"groupscale.kind": "sweep"}).info.run_id
    config = {**vars(bandit_cfg()), "task": dict(TASK)}
    tune = {"low": LOW, "high": HIGH, "trials": TRIALS, "steps": STEPS}
    out = run_tune_lr(config, tune, uri, exp, parent)
    plain = tune_learning_rate(bandit_cfg(), LOW, HIGH, TRIALS, STEPS, seed=0)
    assert [{k: v for k, v in t.items() if k != "run_id"} for t in without_seconds(out)] == without_seconds(plain)
    runs = client.search_runs([exp], f"tags.mlflow.parentRunId = '{parent}'", max_results=100)
    assert len(runs) == TRIALS
    by_id = {r.info.run_id: r for r in runs}
    expected_status = {"COMPLETE": "FINISHED", "PRUNED": "KILLED"}
    assert {t["state"] for t in out["trials"]} == set(expected_status)
    for t in out["trials"]:
        run = by_id[t["run_id"]]
        tags, params, metrics = run.data.tags, run.data.params, run.data.metrics
        assert run.info.status == expected_status[t["state"]]
        assert tags["groupscale.phase"] == "tune_lr" and tags["groupscale.status"] == t["state"]
        assert (tags["groupscale.group_size"], tags["groupscale.samples_per_step"]) == ("4", "48")
        assert float(params["lr"]) == t["lr"] and params["optuna_trial"] == str(t["number"])
        history = client.get_metric_history(run.info.run_id, "reward_mean")
        assert [m.step for m in history] == list(range(1, t["steps_done"] + 1))  # every step up to the end or the prune
        pruner = client.get_metric_history(run.info.run_id, "tune_lr.intermediate")
        assert {m.step: m.value for m in pruner} == t["intermediate"]
        gap_steps = [m.step for m in client.get_metric_history(run.info.run_id, "gap")]
        if t["state"] == "COMPLETE":  # the eval before step 1 and the final one, none between (its value is the last)
            assert metrics["tune_lr.value"] == t["value"] == metrics["gap"] and gap_steps == [0, STEPS]
        else:  # pruned before its final eval
            assert "tune_lr.value" not in metrics and gap_steps == [0]
    assert client.get_run(parent).info.status == "RUNNING"  # the parent is the controller's to end


def test_an_error_mid_tuning_ends_the_open_run_failed(tmp_path, monkeypatch):
    def broken_trainer(cfg, report):
        report({"reward_mean": 0.5}, 1)
        raise RuntimeError("worker lost its model")

    monkeypatch.setattr("workers.engines.groupscale.train_trial", broken_trainer)  # tune_lr imports it where a trial runs
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri)
    exp = client.create_experiment("groupscale/bandit", artifact_location=(tmp_path / "artifacts").as_uri())
    parent = client.create_run(exp, run_name="sweep").info.run_id
    with pytest.raises(RuntimeError, match="lost its model"):
        run_tune_lr(vars(bandit_cfg()), {"low": LOW, "high": HIGH, "trials": 3, "steps": 8}, uri, exp, parent)
    (run,) = client.search_runs([exp], f"tags.mlflow.parentRunId = '{parent}'")
    assert run.info.status == "FAILED" and run.data.tags["groupscale.status"] == "FAILED"
    assert [m.value for m in client.get_metric_history(run.info.run_id, "reward_mean")] == [0.5]

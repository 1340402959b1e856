"""tune_lr over the real stack: a learning-rate search per (G, B) before the sweep proper, whose
trials then train at the tuned lr; both phases in MLflow, the searches in Optuna studies."""

import time

import optuna
import pytest
from mlflow import MlflowClient

from tests.factories import bandit_spec

pytestmark = pytest.mark.e2e
GROUPS = [2, 4, 8]
SPEC = bandit_spec(
    name="e2e-tune-lr",
    group_sizes=GROUPS,
    samples_per_step=[24],
    seeds=[0, 1],
    steps=30,
    grpo={"optimizer": "sgd", "lr": 0.001, "max_grad_norm": 1.0e6},
    eval={"prompts": 64},
    tune_lr={"low": 0.001, "high": 100.0, "trials": 5, "steps": 15},
)


def test_tuned_lr_per_group_size_is_used_by_the_sweep(stack):
    sid = stack.http.post("/v1/sweeps", json=SPEC).json()["id"]
    sweep = stack.wait(sid, {"succeeded", "failed", "cancelled"})
    assert sweep["status"] == "succeeded", sweep
    client = MlflowClient(stack.mlflow_uri)
    parent = client.get_run(sweep["mlflow"]["parent_run_id"])
    best = {g: parent.data.metrics[f"tune_lr.best_lr.G{g}.B24"] for g in GROUPS}
    assert all(0.001 <= lr <= 100.0 for lr in best.values())
    assert min(best.values()) > 0.01  # SGD on the bandit: the 1e-3 end hardly moves the policy

    trials = stack.http.get(f"/v1/sweeps/{sid}/trials").json()
    for trial in trials:  # the sweep proper trains at its (G, B)'s tuned lr, not the spec's 0.001
        assert float(client.get_run(trial["mlflow_run_id"]).data.params["lr"]) == pytest.approx(best[trial["group_size"]])

    query = f"tags.mlflow.parentRunId = '{parent.info.run_id}' and tags.`groupscale.phase` = 'tune_lr'"
    tuning_runs = client.search_runs([parent.info.experiment_id], query)
    assert len(tuning_runs) == 5 * len(GROUPS)
    assert {r.info.status for r in tuning_runs} <= {"FINISHED", "KILLED"}

    storage = optuna.storages.RDBStorage(stack.database_url)
    for g in GROUPS:  # the searches are Optuna studies in the controller's database (optuna-dashboard opens it)
        study = optuna.load_study(study_name=f"groupscale-{sid}-tune_lr-G{g}-B24", storage=storage)
        assert len(study.trials) == 5
        assert study.best_params["lr"] == pytest.approx(best[g])


def test_a_sweep_cancelled_during_lr_tuning_ends_every_tuning_trial_and_run_within_30_s(stack):
    spec = {**SPEC, "name": "e2e-tune-lr-cancel", "tune_lr": {"low": 0.001, "high": 100.0, "trials": 40, "steps": 200}}
    sid = stack.http.post("/v1/sweeps", json=spec).json()["id"]
    client = MlflowClient(stack.mlflow_uri)
    deadline = time.monotonic() + 180
    while True:  # cancel once a search is logging its lr trials
        sweep = stack.http.get(f"/v1/sweeps/{sid}").json()
        parent = sweep["mlflow"]["parent_run_id"]
        if parent:
            query = f"tags.mlflow.parentRunId = '{parent}' and tags.`groupscale.phase` = 'tune_lr'"
            if any(r.info.status == "RUNNING" for r in client.search_runs([sweep["mlflow"]["experiment_id"]], query)):
                break
        assert time.monotonic() < deadline, sweep
        time.sleep(0.5)
    assert stack.http.delete(f"/v1/sweeps/{sid}").json()["status"] == "cancelled"
    cancelled_at = time.monotonic()
    while True:
        runs = client.search_runs([sweep["mlflow"]["experiment_id"]], f"tags.mlflow.parentRunId = '{parent}'")
        open_runs = [r.info.run_id for r in runs if r.info.status == "RUNNING"]
        parent_status = client.get_run(parent).info.status
        if not open_runs and parent_status != "RUNNING":
            break
        assert time.monotonic() - cancelled_at < 30, (open_runs, parent_status)
        time.sleep(0.5)
    assert parent_status == "KILLED"
    sweep = stack.http.get(f"/v1/sweeps/{sid}").json()
    p = sweep["progress"]
    assert sweep["status"] == "cancelled" and p["running"] == 0
    assert p["done"] + p["failed"] + p["cancelled"] == p["total"] == len(GROUPS) * 2  # progress adds up
    assert p["tuning_done"] == p["tuning_total"] == len(GROUPS)  # every tuning ended (cancelled counts as ended)
    trials = stack.http.get(f"/v1/sweeps/{sid}/trials").json()
    assert {t["status"] for t in trials} == {"cancelled"}

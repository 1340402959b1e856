"""The controller is killed with SIGKILL mid-sweep and started again: the sweep completes, and each
trial ran to completion exactly once (counted in MLflow), because trials run as detached Ray actors
on a cluster of their own and the new controller re-attaches to them."""

import json
import os
import signal
import subprocess
import time
from contextlib import contextmanager

import optuna
import pytest
from mlflow import MlflowClient

from service.stack import start_mlflow, stop_process_group
from tests.e2e.conftest import ON_POSTGRES, RAY_LOOPBACK_ENV, RayHead, Stack, assert_fit_of, postgres_env
from tests.factories import spec
from tests.ports import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.slow]  # minutes each: make test-slow (CI runs it)
STEPS = 120
SPEC = spec(name="e2e-restart", group_sizes=[2, 4, 8], steps=STEPS, checkpoint_every=20, eval={"prompts": 64})


@contextmanager
def external_stack(tmp_path, env: dict[str, str]):
    """A controller on a Ray head and an MLflow server of its own (as in docker/), so that killing
    the controller leaves both running. Yields (stack, mlflow_uri)."""
    env = dict(env)
    mlflow_port = free_port()
    backend = env.pop("GROUPSCALE_MLFLOW_BACKEND_URI", None)
    mlflow_proc = start_mlflow(tmp_path / "mlflow", "127.0.0.1", mlflow_port, backend_store_uri=backend)
    head = RayHead(tmp_path)
    mlflow_uri = f"http://127.0.0.1:{mlflow_port}"
    stack = Stack(
        tmp_path / "controller", env={"RAY_ADDRESS": head.address, "MLFLOW_TRACKING_URI": mlflow_uri, **RAY_LOOPBACK_ENV, **env}
    )
    stack.data_dir.mkdir()
    try:
        stack.start()
        yield stack, mlflow_uri
    finally:
        stack.stop()
        head.stop()
        stop_process_group(mlflow_proc)


def sigkill(stack: Stack) -> None:
    os.killpg(stack.proc.pid, signal.SIGKILL)
    stack.proc.wait()


@pytest.mark.parametrize("store", ["sqlite", ON_POSTGRES])
def test_a_sigkilled_controller_restarts_and_each_trial_runs_once(tmp_path, request, store):
    env = postgres_env(request.getfixturevalue("postgres")) if store == "postgres" else {}
    with external_stack(tmp_path, env) as (stack, mlflow_uri):
        sid = stack.http.post("/v1/sweeps", json=SPEC).json()["id"]
        client = MlflowClient(mlflow_uri)
        deadline = time.monotonic() + 240
        while True:  # kill it once a trial is well under way
            trials = stack.http.get(f"/v1/sweeps/{sid}/trials").json()
            assert not any(t["status"] == "failed" for t in trials), trials
            running = [t for t in trials if t["status"] == "running" and t["mlflow_run_id"]]
            if running and client.get_metric_history(running[0]["mlflow_run_id"], "reward_mean"):
                break
            assert time.monotonic() < deadline, trials
            time.sleep(0.5)
        sigkill(stack)
        before = len(client.get_metric_history(running[0]["mlflow_run_id"], "reward_mean"))
        time.sleep(8)
        during = len(client.get_metric_history(running[0]["mlflow_run_id"], "reward_mean"))
        assert during > before, "the trial should go on training while no controller runs"

        stack.start()  # the same data dir (store), port, Ray cluster and MLflow server
        sweep = stack.wait(sid, {"succeeded", "failed", "cancelled"})
        assert sweep["status"] == "succeeded", sweep
        fit = stack.http.get(f"/v1/sweeps/{sid}/fit")
        trials = stack.http.get(f"/v1/sweeps/{sid}/trials").json()
        assert [t["status"] for t in trials] == ["succeeded"] * 3
        assert fit.status_code == 200
        assert_fit_of(trials, fit.json())  # the trial that trained through the restart counts as any other
        assert all(t["attempts"] == 1 for t in trials), trials  # none was launched twice
        parent = sweep["mlflow"]["parent_run_id"]
        children = client.search_runs(
            [sweep["mlflow"]["experiment_id"]], f"tags.mlflow.parentRunId = '{parent}' and tags.`groupscale.kind` = 'trial'"
        )
        assert len(children) == 3  # one run per trial: nothing ran twice
        assert {r.info.run_id for r in children} == {t["mlflow_run_id"] for t in trials}
        for run in children:
            assert run.info.status == "FINISHED"
            steps = [m.step for m in client.get_metric_history(run.info.run_id, "reward_mean")]
            assert sorted(steps) == list(range(1, STEPS + 1))  # every step once: ran to completion exactly once
            assert not client.get_metric_history(run.info.run_id, "resumed_from_step")  # re-attached, not rerun
        assert client.get_run(parent).info.status == "FINISHED"


ADAPTIVE = {
    "name": "e2e-adaptive-restart",
    "task": {"name": "bandit"},
    "model": {"preset": "tabular"},
    "group_sizes": [2, 3, 4, 6, 8, 12, 16, 24],
    "samples_per_step": [48],
    "seeds": [0],
    "steps": 1,
    "measure": {"kind": "gradient_mse", "repeats": 200},
    "mode": "adaptive",
    "adaptive": {"max_trials": 16, "tolerance": 0.01, "parallel": 2},  # a tolerance it cannot meet: all 16 run
}


def test_a_restarted_controller_continues_the_adaptive_study(tmp_path):
    with external_stack(tmp_path, {}) as (stack, _):
        sid = stack.http.post("/v1/sweeps", json=ADAPTIVE).json()["id"]
        deadline = time.monotonic() + 300
        while True:  # kill it half-way
            trials = stack.http.get(f"/v1/sweeps/{sid}/trials").json()
            if sum(t["status"] == "succeeded" for t in trials) >= 6:
                break
            assert time.monotonic() < deadline, trials
            time.sleep(0.3)
        sigkill(stack)
        before = {t["position"]: t for t in stack_trials(stack, sid) if t["status"] == "succeeded"}

        stack.start()
        sweep = stack.wait(sid, {"succeeded", "failed", "cancelled"})
        assert sweep["status"] == "succeeded", sweep
        after = stack_trials(stack, sid)
        for pos, t in before.items():  # what ran before the kill was kept, not rerun
            same = next(a for a in after if a["position"] == pos)
            assert (same["id"], same["metrics"], same["attempts"]) == (t["id"], t["metrics"], 1)
        assert len({(t["group_size"], t["samples_per_step"], t["seed"]) for t in after}) == len(after)  # no point twice
        assert all(t["status"] == "succeeded" and t["attempts"] == 1 for t in after)
        study = optuna.load_study(study_name=f"groupscale-{sid}", storage=stack.database_url)
        assert [t.number for t in study.trials] == list(range(16))  # the study went on to its 16-trial budget
        complete = {t.number: t.value for t in study.trials if t.state.name == "COMPLETE"}
        assert complete == {t["position"]: pytest.approx(t["metrics"]["grad_mse"]) for t in after}  # one row per trial
        # A kill inside ask() (trial created, seed not yet stored) leaves a trial nothing ran: it is
        # marked FAIL on restart, never run, and counted against the budget.
        lost = [t for t in study.trials if t.state.name != "COMPLETE"]
        assert len(lost) <= 1 and all(t.state.name == "FAIL" and "seed" not in t.user_attrs for t in lost)


def stack_trials(stack: Stack, sweep_id: str) -> list[dict]:
    """Read through the store: the controller may be down (the API is)."""
    from sqlalchemy import create_engine, text

    with create_engine(stack.database_url).connect() as conn:
        rows = (
            conn.execute(
                text(
                    "select id, position, group_size, samples_per_step, seed, status, metrics, attempts "
                    "from sweep_trials where sweep_id = :s"
                ),
                {"s": sweep_id},
            )
            .mappings()
            .all()
        )
    return [{**r, "metrics": r["metrics"] if isinstance(r["metrics"], dict) else json.loads(r["metrics"])} for r in rows]


def test_sigterm_ends_the_runs_killed_and_the_next_start_resumes_from_checkpoints(tmp_path):
    """`groupscale up` with its own local Ray head: SIGTERM stops everything cleanly."""
    stack = Stack(tmp_path)
    stack.start()
    try:
        spec = {**SPEC, "name": "e2e-sigterm", "group_sizes": [2, 4], "steps": 200}
        sid = stack.http.post("/v1/sweeps", json=spec).json()["id"]
        deadline = time.monotonic() + 240
        while True:  # stop it once a trial has a checkpoint
            trials = stack.http.get(f"/v1/sweeps/{sid}/trials").json()
            running = [t for t in trials if t["status"] == "running"]
            if any((stack.data_dir / "checkpoints" / t["id"] / "checkpoint.pt").exists() for t in running):
                break
            assert time.monotonic() < deadline, trials
            time.sleep(0.3)
        interrupted = [t["mlflow_run_id"] for t in running]
        stack.stop()  # SIGTERM; SIGKILL only if it has not ended within 60 s
        assert stack.proc.returncode != -signal.SIGKILL
        assert _run_statuses(stack, interrupted) == ["KILLED"] * len(interrupted)  # none left RUNNING while it is down

        stack.start()
        client = MlflowClient(stack.mlflow_uri)
        sweep = stack.wait(sid, {"succeeded", "failed", "cancelled"})
        assert sweep["status"] == "succeeded", sweep
        resumed, trials = [], stack.http.get(f"/v1/sweeps/{sid}/trials").json()
        for t in trials:
            assert client.get_run(t["mlflow_run_id"]).info.status == "FINISHED"
            resumed += [m.value for m in client.get_metric_history(t["mlflow_run_id"], "resumed_from_step")]
        assert resumed and all(v > 0 and v % 20 == 0 for v in resumed)  # resumed from checkpoints, not from scratch
        # each interrupted trial went on in its own run (ended KILLED while the stack was down): one run per trial
        assert set(interrupted) <= {t["mlflow_run_id"] for t in trials}
        children = client.search_runs(
            [sweep["mlflow"]["experiment_id"]], f"tags.mlflow.parentRunId = '{sweep['mlflow']['parent_run_id']}'"
        )
        assert len(children) == len(trials), [(r.info.run_name, r.info.status) for r in children]
    finally:
        stack.stop()


def _run_statuses(stack: Stack, run_ids: list[str]) -> list[str]:
    """The runs' statuses read from MLflow's own database (its server is down with the stack)."""
    from sqlalchemy import create_engine, text

    url = stack.mlflow_backend_uri or f"sqlite:///{(stack.data_dir / 'mlflow.db').resolve()}"
    with create_engine(url).connect() as conn:
        status = dict(conn.execute(text("select run_uuid, status from runs")).all())
    return [status.get(r) for r in run_ids]


LONG_STEPS = 30_000  # a bandit trial of minutes: it outlives six restarts of the controller


@pytest.mark.slow
def test_six_controller_restarts_during_one_trial_leave_one_process_one_run_and_every_step_once(tmp_path):
    """Each restart used to send a liveness call into the trial worker's busy slots; from the fourth on it timed
    out, the trial was taken as lost and started again beside the first copy (two processes, one checkpoint folder
    and one MLflow run)."""
    spec = {**SPEC, "name": "e2e-six-restarts", "task": {"name": "bandit"}, "model": {"preset": "tabular"}}
    spec |= {"group_sizes": [4], "steps": LONG_STEPS, "checkpoint_every": 1000, "eval": {"prompts": 16}}
    with external_stack(tmp_path, {}) as (stack, mlflow_uri):
        sid = stack.http.post("/v1/sweeps", json=spec).json()["id"]
        client = MlflowClient(mlflow_uri)
        deadline = time.monotonic() + 240
        while True:  # until the trial trains (a run() sent before its worker is up dies with the controller)
            trials = stack.http.get(f"/v1/sweeps/{sid}/trials").json()
            if trials and trials[0]["mlflow_run_id"] and client.get_metric_history(trials[0]["mlflow_run_id"], "reward_mean"):
                break
            assert time.monotonic() < deadline, trials
            time.sleep(0.5)
        (trial,) = trials
        title = f"ray::trial-{trial['id']}"
        for restart in range(6):
            sigkill(stack)
            stack.start()
            time.sleep(3)  # the new controller reconciles, then ticks
            (now,) = stack.http.get(f"/v1/sweeps/{sid}/trials").json()
            assert now["status"] == "running" and now["attempts"] == 1, f"restart {restart + 1}: {now}"
            processes = subprocess.run(["pgrep", "-f", title], capture_output=True, text=True).stdout.split()
            assert len(processes) == 1, f"restart {restart + 1}: {len(processes)} processes run the trial"
        sweep = stack.wait(sid, {"succeeded", "failed", "cancelled"})
        assert sweep["status"] == "succeeded", sweep
        (done,) = stack.http.get(f"/v1/sweeps/{sid}/trials").json()
        assert done["attempts"] == 1
        children = client.search_runs([sweep["mlflow"]["experiment_id"]], "tags.`groupscale.kind` = 'trial'")
        assert [r.info.run_id for r in children] == [done["mlflow_run_id"]]  # one run
        steps = [m.step for m in client.get_metric_history(done["mlflow_run_id"], "reward_mean")]
        assert sorted(steps) == list(range(1, LONG_STEPS + 1))  # every step once: no second copy logged into it

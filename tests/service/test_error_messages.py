"""What refusals, notes and statuses say (issue 54.7): the field the user wrote, the allowed values, nothing that did not
happen. At the HTTP layer (no Ray, SQLite store), through the CLI, and on the scheduler's tick with the fake backend."""

import json
import shutil
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from service import lifecycle
from service.cli import app
from service.lifecycle import SweepStatus
from service.main import create_app
from service.scheduler import Scheduler
from service.settings import Settings
from service.store import Sweep
from sweeps.spec import SweepSpec
from tests.factories import spec
from tests.service.test_scheduler import FakeBackend, env, submit, tick  # noqa: F401 - env: the scheduler's fixture

SPEC = spec(name="s", task={"name": "bandit"}, model={"preset": "tabular"}, group_sizes=[2, 4, 8], samples_per_step=[48])
BYO = Path(__file__).resolve().parents[2] / "sweeps" / "examples" / "byo"


@pytest.fixture
def http(tmp_path):
    with TestClient(create_app(Settings(data_dir=tmp_path / "state"), run_scheduler=False)) as c:
        yield c


def _error(r):
    assert r.status_code == 422, r.text
    (d,) = r.json()["detail"]
    return d["loc"], d["msg"]


# -- resources ----------------------------------------------------------------------------------------------------


def test_a_one_process_gpu_refusal_names_gpus_per_process_when_that_is_what_the_user_wrote():
    """It named gpus_per_trial, a field the spec did not have; a user who wrote gpus_per_trial still reads that."""
    from service.preflight import SpecError, preflight

    no_gpu = [{"CPU": 4.0, "GPU": 0.0}]
    for written in ("gpus_per_process", "gpus_per_trial"):
        with pytest.raises(SpecError) as e:
            preflight(SweepSpec.model_validate({**SPEC, "resources": {written: 1}}), Settings(), no_gpu)
        assert e.value.loc == ("resources", written)
        assert f"{written}=1" in e.value.msg and "allowed: 0 (no node of the cluster has a GPU)" in e.value.msg


def test_the_clis_body_keeps_the_resource_names_the_spec_gave_so_the_refusal_names_them_too():
    """The CLI sent model_dump(): both names of each pair, so the server read gpus_per_trial as given."""
    from service.preflight import SpecError, preflight

    for written in ("gpus_per_process", "gpus_per_trial"):
        loaded = SweepSpec.model_validate({**SPEC, "resources": {written: 1}})
        body = loaded.request()
        assert {k for k in body["resources"] if k.startswith("gpus")} == {written}
        assert SweepSpec.model_validate(body) == loaded  # the server reads the same spec
        with pytest.raises(SpecError) as e:
            preflight(SweepSpec.model_validate(body), Settings(), [{"CPU": 4.0, "GPU": 0.0}])
        assert e.value.loc == ("resources", written)


@pytest.mark.parametrize("value", ["2", 2.5, True, None])
def test_a_num_processes_of_the_wrong_type_says_the_allowed_range(http, value):
    loc, msg = _error(http.post("/v1/sweeps", json={**SPEC, "resources": {"num_processes": value}}))
    assert loc == ["body", "resources", "num_processes"]
    assert msg.endswith("allowed: an integer from 1 to 512"), msg


def test_an_answer_of_a_several_process_spec_is_checked_against_the_one_process_it_runs_on(tmp_path):
    """An answer (like a probe) runs on one process: a cluster of 2 CPUs takes it although 3 processes of a trial do
    not fit there; the sweep of the same spec is still refused, naming num_processes."""
    settings = Settings(data_dir=tmp_path / "state")
    with TestClient(create_app(settings, run_scheduler=False)) as c:
        c.app.state.scheduler = Scheduler(c.app.state.store, settings, None, FakeBackend(cpus=2.0))
        three = {**SPEC, "resources": {"num_processes": 3}, "answer": {"budget": 5000}}
        r = c.post("/v1/answers", json=three)
        assert r.status_code == 201, r.text
        assert c.post("/v1/probes", json=three).status_code == 201
        loc, msg = _error(c.post("/v1/sweeps", json=three))
        assert loc == ["body", "resources", "num_processes"] and "allowed: 1 to 2" in msg


# -- accelerate configs -------------------------------------------------------------------------------------------


def test_an_accelerate_config_is_refused_only_for_an_ambiguous_value_it_reads(tmp_path):
    """accelerate's own configs say ``distributed_type: NO``; unquoted, YAML 1.1 reads it as false and 1.2 as the text:
    only num_processes is read, so it does not matter. An ambiguous num_processes still does."""
    recipe = tmp_path / "grpo.yaml"
    recipe.write_text("model_name_or_path: /m\nper_device_train_batch_size: 16\nnum_generations: 16\n")
    accelerate = tmp_path / "acc.yaml"
    accelerate.write_text("compute_environment: LOCAL_MACHINE\ndistributed_type: NO\nnum_processes: 2\nuse_cpu: no\n")
    args = ["spec", "from-trl", str(recipe), "--group-sizes", "8,16", "--accelerate-config", str(accelerate)]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    assert "num_processes: 2" in r.stdout
    accelerate.write_text("distributed_type: MULTI_GPU\nnum_processes: 010\n")
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 2 and "num_processes (line 2): 010 is 8 to YAML 1.1" in r.output, r.output


# -- rewards and paths --------------------------------------------------------------------------------------------


def test_a_reward_weight_of_0_is_accepted_with_a_note_saying_it_is_scored_and_logged_only(tmp_path):
    """TRL users give a term weight 0 to watch it without training on it (its reward/<key> metric is still logged):
    accepted, and the submit answer says what it does and what it costs."""
    data = tmp_path / "data"
    data.mkdir()
    shutil.copy(BYO / "train.parquet", data / "train.parquet")
    rewards = [
        {"name": "numeric_match", "answer_column": "solution"},
        {"name": "exact_match", "answer_column": "solution", "weight": 0},
    ]
    task = {"name": "dataset", "path": str(data / "train.parquet"), "rewards": rewards}
    body = {**SPEC, "task": task, "model": {"preset": "chat-tiny"}, "group_sizes": [2, 4], "samples_per_step": [8]}
    with TestClient(create_app(Settings(data_dir=tmp_path / "state"), run_scheduler=False)) as c:
        r = c.post("/v1/sweeps", json=body)
        assert r.status_code == 201, r.text
        assert r.json()["warnings"] == [
            "task.rewards[1].weight is 0: exact_match is scored and logged (metric reward/exact_match) but adds nothing "
            "to the reward; remove the entry if you do not need its metric (scoring it costs time)"
        ]


def test_a_relative_task_path_over_http_is_read_from_the_controllers_working_directory_and_said_so(http, tmp_path, monkeypatch):
    """A spec file's relative paths are the file's folder's (the CLI resolves them); over HTTP there is no file: the
    controller reads it from its working directory, stores it absolute (the workers read that file) and says so."""
    monkeypatch.chdir(tmp_path)
    jsonl = {**SPEC, "model": {"preset": "tiny-llama"}}
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "t.jsonl").write_text(
        "".join(json.dumps({"prompt": f"{i}+1=", "answer": i + 1}) + "\n" for i in range(4))
    )
    r = http.post("/v1/sweeps", json={**jsonl, "task": {"name": "jsonl", "path": "tasks/t.jsonl"}})
    assert r.status_code == 201, r.text
    where = tmp_path.resolve() / "tasks" / "t.jsonl"
    assert r.json()["spec"]["task"]["path"] == str(where)
    assert r.json()["warnings"] == [
        f"task.path 'tasks/t.jsonl' is relative: read from the controller's working directory {str(tmp_path.resolve())!r}, "
        f"as {str(where)!r} (stored so); give an absolute path, or submit with the CLI, which reads it from the spec "
        "file's folder"
    ]
    loc, msg = _error(http.post("/v1/sweeps", json={**jsonl, "task": {"name": "jsonl", "path": "tasks/missing.jsonl"}}))
    missing = tmp_path.resolve() / "tasks" / "missing.jsonl"
    assert loc == ["body", "task", "path"]
    assert msg == (
        f"{str(missing)!r} is not a readable file on the controller (task.path 'tasks/missing.jsonl' is relative: read "
        f"from the controller's working directory {str(tmp_path.resolve())!r})"
    )


# -- extend -------------------------------------------------------------------------------------------------------


def _finished_sweep(http) -> str:
    sid = http.post("/v1/sweeps", json=SPEC).json()["id"]
    with http.app.state.store.session() as s:
        s.get(Sweep, sid).status = SweepStatus.SUCCEEDED
    return sid


def test_extend_with_a_misspelt_field_lists_only_the_fields_extend_takes(http):
    loc, msg = _error(http.post(f"/v1/sweeps/{_finished_sweep(http)}/extend", json={"group_size": [16]}))
    assert loc == ["body", "group_size"]
    assert msg == "unknown field 'group_size' (did you mean group_sizes?); allowed: group_sizes, seeds"


def test_extend_with_nothing_asked_says_so(http):
    r = http.post(f"/v1/sweeps/{_finished_sweep(http)}/extend", json={})
    assert r.status_code == 422
    assert r.json()["detail"] == "nothing asked: give group_sizes (group sizes to add) or seeds (seeds to add at every G)"


# -- sweep statuses -----------------------------------------------------------------------------------------------


def test_a_cancelled_sweep_has_no_error(env):  # noqa: F811 - the fixture imported above
    store, _, _, sched = env
    sid = submit(store)
    tick(sched)
    with store.session() as s:
        assert lifecycle.cancel_sweep(s, s.get(Sweep, sid))
    with store.read() as s:
        assert (s.get(Sweep, sid).status, s.get(Sweep, sid).error) == (SweepStatus.CANCELLED, None)


def test_a_sweep_failed_past_its_budget_says_which_trials_were_cancelled_only_when_some_were(env):  # noqa: F811
    store, backend, _, sched = env
    sid = submit(store, group_sizes=[2], seeds=[0], max_failed_trials=0)  # its one trial
    tick(sched)
    backend.fail(backend.running()[0], ValueError("reward r.py:f raised"))
    tick(sched)
    with store.read() as s:
        sweep = s.get(Sweep, sid)
        assert sweep.status == SweepStatus.FAILED
        assert sweep.error == "1 trial failed, more than max_failed_trials=0. First causes: ValueError: reward r.py:f raised"
    several = submit(store, group_sizes=[2, 4], seeds=[0, 1], max_failed_trials=0)  # 4 trials, 2 run at a time
    tick(sched)
    backend.fail(backend.running()[0], ValueError("CUDA out of memory"))
    tick(sched)
    with store.read() as s:
        error = s.get(Sweep, several).error
        assert error == (
            "1 trial failed, more than max_failed_trials=0; the 3 left were cancelled. First causes: ValueError: CUDA out "
            "of memory"
        )


def test_engine_trl_with_dynamic_sampling_is_refused_naming_the_field_over_http_and_by_the_cli(http, tmp_path):
    """TRL's GRPOTrainer has no group filter: 422 at the HTTP layer, exit 2 from `submit` before any request."""
    body = spec(engine="trl", grpo={"dynamic_sampling": {"max_batches": 4}})
    loc, msg = _error(http.post("/v1/sweeps", json=body))
    assert loc == ["body", "trl"] and "engine trl does not take grpo.dynamic_sampling" in msg, (loc, msg)
    path = tmp_path / "s.json"
    path.write_text(json.dumps(body))
    r = CliRunner().invoke(app, ["submit", str(path), "--url", "http://127.0.0.1:9"])
    assert r.exit_code == 2 and "grpo.dynamic_sampling" in r.output, r.output

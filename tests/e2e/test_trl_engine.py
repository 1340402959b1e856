"""engine trl on the real stack: TRL's GRPOTrainer trains each trial of a sweep on Ray, logging TRL's metrics and
groupscale's gap to MLflow; cancel, and a killed worker resuming from TRL's last checkpoint, as for the groupscale engine."""

import json
import os
import shutil
import subprocess
import sys
import time

import pytest
from mlflow import MlflowClient

from tests.e2e.conftest import Stack
from tests.user_material import REWARDS, word_problem_rows, write_parquet
from workers.engines.trl_checkpoints import sealed_steps
from workers.models.presets import preset_path

pytestmark = [pytest.mark.e2e, pytest.mark.slow]  # a few minutes on 2 cores: `make test-slow` (CI runs it)
TRL_NAMES = ("reward", "reward_std", "frac_reward_zero_std", "completions/mean_length", "entropy", "loss", "grad_norm",
             "learning_rate", "rewards/accuracy.accuracy_reward/mean")  # fmt: skip
RECIPE = {"learning_rate": "3e-4", "max_completion_length": 24, "lr_scheduler_type": "constant", "per_device_train_batch_size": 8}


@pytest.fixture(scope="module")
def trl_stack(tmp_path_factory, model_cache):
    root = tmp_path_factory.mktemp("trl")
    rewards, data, models = root / "rewards", root / "data", root / "models"
    shutil.copytree(REWARDS, rewards)
    data.mkdir()
    write_parquet(word_problem_rows(80), data / "train.parquet")
    preset_path("chat-tiny", None, model_cache)
    (root / "cli").mkdir()
    (root / "cli" / "models").symlink_to(model_cache)
    out = subprocess.run(
        [sys.executable, "-m", "service", "models", "export", "chat-tiny", str(models / "chat-tiny")],
        env={**os.environ, "GROUPSCALE_DATA_DIR": str(root / "cli")},
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    (root / "stack").mkdir()
    stack = Stack(root / "stack", {"GROUPSCALE_REWARD_ROOT": str(rewards)})
    stack.start()
    yield stack, data / "train.parquet", models / "chat-tiny"
    stack.stop()


def _spec(data, model, **over) -> dict:
    spec = {
        "name": "trl-engine",
        "engine": "trl",
        "trl": RECIPE,
        "task": {"name": "dataset", "path": str(data), "rewards": [{"function": "mathpkg/rewards/accuracy.py:accuracy_reward"}]},
        "model": {"path": str(model)},
        "group_sizes": [2, 4],
        "samples_per_step": [16],
        "seeds": [0],
        "steps": 10,
        "checkpoint_every": 0,
        "eval": {"prompts": 8, "samples_per_prompt": 2, "every": 5},
    }
    return {**spec, **over}


def test_an_engine_trl_sweep_logs_trls_metrics_and_gap_and_is_fitted(trl_stack):
    stack, data, model = trl_stack
    r = stack.http.post("/v1/sweeps", json=_spec(data, model), timeout=90)
    assert r.status_code == 201, r.text
    assert r.json()["step_structure"] == [
        "each generation of 16 completions feeds 1 optimizer step(s) of 16 (per_device_train_batch_size 8 x 1 process(es) "
        "x gradient_accumulation_steps 2, steps_per_generation 2)"
    ]
    sweep = stack.wait(r.json()["id"], {"succeeded", "failed", "cancelled"}, timeout_s=900)
    trials = stack.http.get(f"/v1/sweeps/{sweep['id']}/trials").json()
    assert sweep["status"] == "succeeded" and {t["status"] for t in trials} <= {"succeeded", "no_signal"}, (sweep, trials)
    client = MlflowClient(stack.mlflow_uri)
    for t in trials:
        run = t["mlflow_run_id"]
        for name in TRL_NAMES:
            assert sorted(m.step for m in client.get_metric_history(run, name)) == list(range(1, 11)), (t["group_size"], name)
        params = client.get_run(run).data.params  # what TRL ran with, not groupscale's grpo: defaults
        assert not any(k.startswith("grpo.") for k in params), params
        assert (params["trl.max_completion_length"], params["trl.num_generations"]) == ("24", str(t["group_size"]))
        if t["status"] == "succeeded":  # the eval before step 1 (step 0), at eval.every = 5 and at the end
            assert sorted(m.step for m in client.get_metric_history(run, "gap")) == [0, 5, 10]
            assert t["metrics"]["gap@5"] == next(m.value for m in client.get_metric_history(run, "gap") if m.step == 5)
    fit = stack.http.get(f"/v1/sweeps/{sweep['id']}/fit").json()
    assert fit["status"] in ("ok", "boundary", "insufficient_data", "no_signal") and "n_rows" in fit
    at5 = stack.http.get(f"/v1/sweeps/{sweep['id']}/fit", params={"step": 5}).json()  # the TRL trials' gap@5 as data
    assert at5["n_rows"] == sum(t["status"] == "succeeded" for t in trials) > 0, at5


def test_cancel_stops_an_engine_trl_sweep(trl_stack):
    stack, data, model = trl_stack
    sid = stack.http.post("/v1/sweeps", json=_spec(data, model, name="trl-cancel", steps=100_000), timeout=90).json()["id"]
    deadline = time.monotonic() + 180
    while not any(t["status"] == "running" for t in stack.http.get(f"/v1/sweeps/{sid}/trials").json()):
        assert time.monotonic() < deadline
        time.sleep(0.5)
    time.sleep(8)  # TRL is training
    t0 = time.monotonic()
    assert stack.http.delete(f"/v1/sweeps/{sid}").json()["status"] == "cancelled"
    while any(t["status"] == "running" for t in stack.http.get(f"/v1/sweeps/{sid}/trials").json()):
        assert time.monotonic() - t0 < 10, "running trials must stop within 10 s of a cancel"
        time.sleep(0.25)
    client = MlflowClient(stack.mlflow_uri)
    for t in stack.http.get(f"/v1/sweeps/{sid}/trials").json():
        assert t["status"] == "cancelled"
        if t["mlflow_run_id"]:
            deadline = time.monotonic() + 30
            while client.get_run(t["mlflow_run_id"]).info.status != "KILLED":
                assert time.monotonic() < deadline
                time.sleep(0.5)


def _kill_worker_once_sealed(stack, sid: str, step: int) -> None:
    """SIGKILL the trial's worker once its checkpoint of ``step`` is sealed (its manifest written), while it runs."""
    deadline = time.monotonic() + 300
    while True:
        (trial,) = stack.http.get(f"/v1/sweeps/{sid}/trials").json() or [None]
        if trial and trial["status"] == "running" and step in sealed_steps(stack.data_dir / "checkpoints" / trial["id"]):
            break
        assert time.monotonic() < deadline, trial
        time.sleep(0.1)
    states = [json.loads(f.read_text()) for f in (stack.data_dir / "workers").glob("*.json")]
    (pid,) = [s["pid"] for s in states if s["trial"] == f"trial-{trial['id']}" and not s["done"]]
    os.kill(pid, 9)


def test_a_killed_engine_trl_worker_resumes_from_its_checkpoint_and_past_t_trains_nothing(trl_stack):
    """Killed once mid-trial (its checkpoint of step 4 sealed) and once after its last checkpoint (step 12 = T, in the
    final evaluation, made long here): each start resumes from the sealed checkpoint, and MLflow holds steps 1..12
    once (TRL resumed past T trained step 13)."""
    stack, data, model = trl_stack
    spec = _spec(data, model, name="trl-kill", group_sizes=[4], steps=12, checkpoint_every=4)
    spec["eval"] = {"prompts": 64, "samples_per_prompt": 4, "every": None}  # the final eval: seconds to kill it in
    sid = stack.http.post("/v1/sweeps", json=spec, timeout=90).json()["id"]
    _kill_worker_once_sealed(stack, sid, 4)
    _kill_worker_once_sealed(stack, sid, 12)
    sweep = stack.wait(sid, {"succeeded", "failed", "cancelled"}, timeout_s=600)
    (trial,) = stack.http.get(f"/v1/sweeps/{sid}/trials").json()
    why = (sweep["status"], sweep["error"], trial["status"], trial.get("reason"), trial.get("attempts"))
    assert sweep["status"] == "succeeded" and trial["status"] in ("succeeded", "no_signal"), why
    client = MlflowClient(stack.mlflow_uri)
    steps = [m.step for m in client.get_metric_history(trial["mlflow_run_id"], "loss")]
    assert sorted(steps) == list(range(1, 13))  # one point per step: none lost, none twice, none past T
    resumed = [m.value for m in client.get_metric_history(trial["mlflow_run_id"], "resumed_from_step")]
    assert sorted(resumed) == [4.0, 12.0], resumed  # from the sealed checkpoints: mid-trial, then at T
    runs = client.search_runs([sweep["mlflow"]["experiment_id"]], filter_string=f"tags.`groupscale.trial_id` = '{trial['id']}'")
    assert len(runs) == 1  # one MLflow run for the trial


@pytest.mark.parametrize(
    ("recipe", "field", "says"),
    [
        ({"optim": "adamw_8bit"}, "optim", "needs bitsandbytes, which the workers lack: pip install bitsandbytes"),
        ({"use_vllm": True}, "use_vllm", "needs vllm, which the workers lack"),
        ({"auto_find_batch_size": True}, "auto_find_batch_size", "TRL refuses the recipe's GRPOConfig"),
    ],
    ids=["unsloth-8bit-optim", "use-vllm", "auto-find-batch-size"],
)
def test_a_recipe_that_cannot_train_on_the_workers_is_422_at_submit(trl_stack, recipe, field, says):
    """Accepted, then every trial failed: the recipe's GRPOConfig is built, and the packages it names looked for,
    on a Ray worker at submit (neither vLLM nor bitsandbytes is installed here)."""
    stack, data, model = trl_stack
    r = stack.http.post("/v1/sweeps", json=_spec(data, model, name="trl-refused", trl={**RECIPE, **recipe}), timeout=180)
    assert r.status_code == 422, r.text
    [error] = r.json()["detail"]
    assert error["loc"] == ["body", "trl", field] and says in error["msg"], error
    assert not error["msg"].startswith("trl."), error  # the loc names the field; the CLI printed it twice
    assert "checked on a Ray worker" in error["msg"]


def test_a_two_process_trl_sweep_trains_each_trial_on_two_processes_with_one_run(trl_stack):
    """resources.num_processes 2 with engine trl: each trial's TRL runs on 2 processes of one placement group
    (accelerate on groupscale's gloo group), B = 16 split 8 a process, one MLflow run per trial with world_size 2."""
    stack, data, model = trl_stack
    body = _spec(data, model, name="trl-two-processes", group_sizes=[2], steps=4, resources={"num_processes": 2})
    r = stack.http.post("/v1/sweeps", json=body, timeout=90)
    assert r.status_code == 201, r.text
    assert r.json()["step_structure"] == [
        "each generation of 16 completions feeds 1 optimizer step(s) of 16 (per_device_train_batch_size 8 x 2 process(es) "
        "x gradient_accumulation_steps 1, steps_per_generation 1)"
    ]
    sweep = stack.wait(r.json()["id"], {"succeeded", "failed", "cancelled"}, timeout_s=900)
    (trial,) = stack.http.get(f"/v1/sweeps/{sweep['id']}/trials").json()
    assert sweep["status"] == "succeeded" and trial["status"] in ("succeeded", "no_signal"), (sweep, trial)
    client = MlflowClient(stack.mlflow_uri)
    parent = sweep["mlflow"]["parent_run_id"]
    (run,) = client.search_runs([sweep["mlflow"]["experiment_id"]], filter_string=f"tags.mlflow.parentRunId = '{parent}'")
    assert run.data.params["world_size"] == "2" and run.data.params["trl.per_device_train_batch_size"] == "8"
    assert sorted(m.step for m in client.get_metric_history(run.info.run_id, "loss")) == [1, 2, 3, 4]  # rank 0 alone logs


def test_answer_for_an_engine_trl_spec_over_http_trains_its_stages_with_trl(trl_stack):
    """POST /v1/answers with engine trl: the answer's pilot and rungs are TRL trials on a Ray worker, within the
    budget (a spec `groupscale answer` sends as is)."""
    stack, data, model = trl_stack
    body = _spec(data, model, name="trl-answer", answer={"budget": 2000})
    r = stack.http.post("/v1/answers", json=body, timeout=90)
    assert r.status_code == 201, r.text
    deadline = time.monotonic() + 600
    while (answer := stack.http.get(f"/v1/answers/{r.json()['id']}").json())["status"] not in ("succeeded", "failed"):
        assert time.monotonic() < deadline, answer
        time.sleep(1)
    assert answer["status"] == "succeeded", answer
    result = answer["result"]
    assert 0 < result["cost"]["completions"] <= 2000 and result["stages"]["pilot"]["probes"], result
    assert result["recommended_group_size"] in (2, 4)

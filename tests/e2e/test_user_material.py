"""Users' own material through the real stack (Ray, the MLflow server, HTTP and the CLI): every shape of reward file,
a verl parquet, a model folder that ships sampling fields, bad rewards refused at submit, an edited file on a warm worker.

One warm worker (a head of one CPU), so the trials of the sweeps below all run in the same worker process.
"""

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mlflow import MlflowClient

from tests.e2e.conftest import Stack
from tests.ports import free_port
from tests.reward_server import running
from tests.user_material import REWARDS, verl_rows, word_problem_rows, write_parquet
from workers.models.presets import preset_path

pytestmark = [pytest.mark.e2e, pytest.mark.slow]  # a few minutes on 2 cores: `make test-slow` (CI runs it)
DONE = {"succeeded", "failed", "cancelled"}
THINKING = "{% if enable_thinking is defined and not enable_thinking %}<think>\n\n</think>\n\n{% endif %}"


@pytest.fixture(scope="module")
def material(tmp_path_factory, model_cache):
    """Roots with copies of the reward files, the data and an exported chat-tiny folder that ships sampling fields,
    and a stack with one warm worker that takes user rewards from its reward root."""
    root = tmp_path_factory.mktemp("material")
    rewards, data, models = root / "rewards", root / "data", root / "models"
    shutil.copytree(REWARDS, rewards)
    data.mkdir()
    (data / "x[v2].jsonl").write_text("".join(json.dumps(r) + "\n" for r in word_problem_rows(40)))
    (data / "xv.jsonl").write_text(json.dumps({"question": "a decoy without the columns"}) + "\n")
    write_parquet(verl_rows(40), data / "verl.parquet")
    preset_path("chat-tiny", None, model_cache)
    state = root / "cli"
    state.mkdir()
    (state / "models").symlink_to(model_cache)
    model = models / "chat-tiny"
    out = subprocess.run(
        [sys.executable, "-m", "service", "models", "export", "chat-tiny", str(model)],
        env={**os.environ, "GROUPSCALE_DATA_DIR": str(state)},
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    config = json.loads((model / "generation_config.json").read_text())
    (model / "generation_config.json").write_text(json.dumps({**config, "repetition_penalty": 2.0, "top_k": 3}))
    (model / "chat_template.jinja").write_text((model / "chat_template.jinja").read_text() + THINKING)
    env = {
        "GROUPSCALE_REWARD_ROOT": str(rewards),
        "GROUPSCALE_REWARD_URLS": "http://127.0.0.1:",  # the reward servers the tests start
        "GROUPSCALE_DATA_ROOT": str(data),
        "GROUPSCALE_MODEL_ROOT": str(models),
        "GROUPSCALE_RAY_NUM_CPUS": "1",
        "GROUPSCALE_WARM_WORKERS": "1",
    }
    (root / "stack").mkdir()
    stack = Stack(root / "stack", env)
    stack.start()
    yield stack, rewards, data, model
    stack.stop()


def _spec(name: str, task: dict, model: Path, **model_options) -> dict:
    return {
        "name": name,
        "task": {"name": "dataset", **task},
        "model": {"path": str(model), **model_options},
        "group_sizes": [2],
        "samples_per_step": [8],
        "steps": 3,
        "checkpoint_every": 0,
        "grpo": {"lr": 3e-4, "max_new_tokens": 24},
        "eval": {"prompts": 6, "samples_per_prompt": 2},
    }


def _trial(stack: Stack, sweep_id: str) -> dict:
    sweep = stack.wait(sweep_id, DONE, timeout_s=600)
    (trial,) = stack.http.get(f"/v1/sweeps/{sweep_id}/trials").json()
    assert sweep["status"] == "succeeded" and trial["status"] == "succeeded", (sweep, trial)
    return trial


def _last(client: MlflowClient, run_id: str, key: str) -> float:
    return client.get_run(run_id).data.metrics[key]


def test_bad_rewards_are_refused_at_submit_naming_the_reward_and_the_cause(material):
    stack, rewards, data, model = material
    cases = [
        ({"function": "broken/missing_package.py:reward"}, "(pip install groupscale-not-a-real-package on every Ray worker)"),
        ({"function": "broken/wrong.py:one_argument", "convention": "trl"}, "wrong.py:one_argument raised TypeError"),
        ({"function": "conventions/verifiers_func.py:fits_nothing"}, "takes the arguments of none of the reward conventions"),
        ({"function": "broken/wrong.py:a_number"}, "returned a float, not a list of 2 floats"),
        ({"function": "broken/wrong.py:get_reward", "kwargs": {"scale": 3}}, "raised ValueError: scale 3 is not allowed"),
    ]
    for entry, words in cases:
        task = {"path": str(data / "x[v2].jsonl"), "rewards": [{"name": "numeric_match", "answer_column": "solution"}, entry]}
        start = time.monotonic()
        r = stack.http.post("/v1/sweeps", json=_spec("bad", task, model), timeout=90)
        assert r.status_code == 422 and time.monotonic() - start < 60, (r.status_code, r.text)
        (detail,) = r.json()["detail"]
        assert detail["loc"] == ["body", "task", "rewards", 1, "function"] and words in detail["msg"], detail
    down = f"http://127.0.0.1:{free_port()}/reward"  # a reward server that is not running
    task = {"path": str(data / "x[v2].jsonl"), "rewards": [{"url": down, "retries": 1}]}
    r = stack.http.post("/v1/sweeps", json=_spec("down", task, model), timeout=90)
    assert r.status_code == 422, r.text
    (detail,) = r.json()["detail"]
    assert detail["loc"] == ["body", "task", "rewards", 0, "url"]
    assert f"the reward server {down} failed after 2 requests" in detail["msg"]
    assert stack.http.get("/v1/sweeps").json() == []  # nothing was scheduled


def test_every_shape_of_reward_file_in_a_trial_on_ray_logging_to_mlflow(material):
    """Relative reward paths over HTTP, package and sibling imports, TRL's own rewards, a factory, an async reward,
    math_verify with its signal-based timeouts (built-in and direct) in a trial thread of a Ray worker,
    log_metric / log_extra in the trial's MLflow run, a template variable, a folder's sampling fields ignored; files of
    OpenRLHF's, EasyR1's and verifiers' shapes under convention auto (the submit's notes say what it took) and a
    reward server (tests/reward_server.py, a process)."""
    stack, rewards, data, model = material
    with running(free_port()) as server:
        _every_shape(stack, rewards, data, model, server)


def _every_shape(stack: Stack, rewards: Path, data: Path, model: Path, server: str) -> None:
    entries = [
        {"function": "mathpkg/rewards/accuracy.py:accuracy_reward"},
        {"function": "plain/siblings.py:format_reward"},
        {"function": "plain/uses_trl.py:think_format_reward", "weight": 0.1},
        {"function": "plain/factories.py:get_length_penalty", "kwargs": {"max_len": 24, "penalty": -0.1}},
        {"function": "plain/async_rewards.py:graded_remotely"},
        {"function": "plain/logging_rewards.py:logged_length"},
        {"function": "plain/math_direct.py:verified"},
        {"function": "plain/my+rewards(v2).py:constant"},
        {"name": "math_verify", "answer_column": "solution"},
        {"function": "conventions/openrlhf_reward.py:reward_func", "answer_column": "solution"},
        {"function": "conventions/easyr1_math.py:compute_score", "answer_column": "solution"},
        {"function": "conventions/verifiers_env.py:load_environment", "answer_column": "solution"},
        {"url": f"{server}/json", "batch_size": 3},
    ]
    spec = _spec(
        "every-shape",
        {"path": str(data / "x[v2].jsonl"), "rewards": entries},
        model,
        chat_template_kwargs={"enable_thinking": False},
    )
    r = stack.http.post("/v1/sweeps", json=spec, timeout=90)
    assert r.status_code == 201, r.text
    assert r.json()["spec"]["task"]["rewards"][0]["function"] == f"{rewards / 'mathpkg/rewards/accuracy.py'}:accuracy_reward"
    took = {w.split(":")[0]: w.rsplit("(convention: ", 1)[1][:-1] for w in r.json()["warnings"] if "convention auto" in w}
    assert took == {f"task.rewards[{i}]": "trl" for i in range(8)} | {
        "task.rewards[9]": "openrlhf",
        "task.rewards[10]": "easyr1",
        "task.rewards[11]": "verifiers",
    }
    trial = _trial(stack, r.json()["id"])
    client = MlflowClient(stack.mlflow_uri)
    run = client.get_run(trial["mlflow_run_id"])
    keys = ["accuracy.accuracy_reward", "siblings.format_reward", "uses_trl.think_format_reward", "factories.get_length_penalty",
            "async_rewards.graded_remotely", "logging_rewards.logged_length", "math_direct.verified", "my_rewards_v2_.constant",
            "math_verify", "openrlhf_reward.reward_func", "easyr1_math.compute_score", "verifiers_env.load_environment",
            f"http.127.0.0.1_{server.rsplit(':', 1)[1]}"]  # fmt: skip
    for key in keys:
        assert len(client.get_metric_history(run.info.run_id, f"reward/{key}")) == 3, key
    assert run.data.metrics["reward/my_rewards_v2_.constant"] == 0.25
    conventions = {k: v for k, v in run.data.params.items() if k.endswith(".convention")}
    assert [conventions[f"task.rewards.{i}.convention"] for i in (0, 8, 9, 10, 11, 12)] == [
        "trl", "builtin", "openrlhf", "easyr1", "verifiers", "http"
    ]  # fmt: skip
    progress = [m.value for m in sorted(client.get_metric_history(run.info.run_id, "reward_log/progress"), key=lambda m: m.step)]
    assert progress == pytest.approx([0, 1 / 3, 2 / 3])  # log_metric, with TRL's trainer_state
    assert run.data.tags["groupscale.generation_config_ignored"] == "repetition_penalty=2.0, top_k=3"
    table = json.loads(Path(client.download_artifacts(run.info.run_id, "samples.json")).read_text())
    rows = [dict(zip(table["columns"], row)) for row in table["data"]]
    assert rows and all(row["chars"] == len(row["completion"]) for row in rows)  # log_extra: a column of the table
    assert all(row["prompt"].endswith("<think>\n\n</think>\n\n") for row in rows)  # enable_thinking reached the template


def test_a_verl_parquet_with_a_verl_scorer_and_a_built_in_from_a_spec_file_through_the_cli(material, tmp_path):
    stack, rewards, data, model = material
    spec = _spec("verl", {"path": str(data / "verl.parquet"), "rewards": []}, model)
    yaml_text = json.dumps(spec).replace(
        '"rewards": []',
        '"rewards": [{"name": "numeric_match", "answer_column": "reward_model.ground_truth"}, '
        '{"function": "plain/verl_score.py:compute_score", "convention": "verl"}]',
    )
    (tmp_path / "spec.yaml").write_text(yaml_text)  # JSON is YAML; the reward file is on the server, not beside it
    out = stack.cli("submit", str(tmp_path / "spec.yaml"))
    assert out.returncode == 0, out.stderr
    sweep_id = out.stdout.strip().split()[-1]
    trial = _trial(stack, sweep_id)
    client = MlflowClient(stack.mlflow_uri)
    history = {
        key: [m.value for m in sorted(client.get_metric_history(trial["mlflow_run_id"], f"reward/{key}"), key=lambda m: m.step)]
        for key in ("numeric_match", "verl_score.compute_score")
    }
    assert len(history["numeric_match"]) == 3 and history["numeric_match"] == history["verl_score.compute_score"]


def test_an_edited_reward_file_is_read_again_by_the_warm_worker(material):
    stack, rewards, data, model = material
    path = rewards / "edit_me.py"
    trials = []
    for value in (0.25, 0.75):
        # every group of G = 2 gets rewards 0 and value (a signal), so the step's mean is value / 2
        path.write_text(f"def r(completions, **kwargs):\n    return [{value} * (i % 2) for i in range(len(completions))]\n")
        task = {"path": str(data / "x[v2].jsonl"), "rewards": [{"function": "edit_me.py:r"}]}
        r = stack.http.post("/v1/sweeps", json=_spec(f"edit-{value}", task, model), timeout=90)
        assert r.status_code == 201, r.text
        trials.append(_trial(stack, r.json()["id"]))
        ran = [json.loads(f.read_text()) for f in (stack.data_dir / "workers").glob("*.json")]
        (worker,) = [w for w in ran if w["trial"] == f"trial-{trials[-1]['id']}"]
        trials[-1]["pid"] = worker["pid"]
    client = MlflowClient(stack.mlflow_uri)
    assert [_last(client, t["mlflow_run_id"], "reward/edit_me.r") for t in trials] == [0.125, 0.375]
    assert trials[0]["pid"] == trials[1]["pid"]  # one warm worker process ran both

"""What a trial's MLflow run shows beside its training metrics: system metrics, which charts are flat, its dataset."""

import pytest
from mlflow import MlflowClient

from sweeps.trial import TrialConfig
from workers.worker import run_trial

SAMPLING_INTERVAL_S = 0.1


def test_a_logged_trial_has_system_metrics(tmp_path, monkeypatch):
    # MLflow's monitor publishes a sample after each interval the trial outlasts; the trial must outlast a few of them
    # with a margin on a fast machine (200 tabular steps once took 0.49 s in `make test`, under a fixed 0.5 s guard)
    monkeypatch.setenv("MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL", str(SAMPLING_INTERVAL_S))
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"  # a real MLflow store, no server needed
    client = MlflowClient(uri)
    run_id = client.create_run(client.create_experiment("e", artifact_location=str(tmp_path / "art"))).info.run_id
    cfg = TrialConfig.flat(
        task={"name": "bandit"},
        model={"preset": "tabular"},
        group_size=4,
        samples_per_step=16,
        seed=0,
        steps=800,
        cache_dir=str(tmp_path / "models"),
    )
    out = run_trial(cfg.to_dict(), uri, run_id)
    assert out["status"] == "succeeded" and out["seconds"] > 3 * SAMPLING_INTERVAL_S, out
    metrics = client.get_run(run_id).data.metrics
    assert "reward_mean" in metrics
    assert 0.0 <= metrics["system/cpu_utilization_percentage"] <= 100.0 * 64
    assert metrics["system/system_memory_usage_megabytes"] > 0


def test_a_trial_run_says_which_charts_are_flat_by_construction(tmp_path):
    from service.tracking import Tracking
    from sweeps.spec import SweepSpec

    base = {"name": "n", "task": {"name": "bandit"}, "model": {"preset": "tabular"}, "group_sizes": [2, 4]}
    base |= {"samples_per_step": [16], "seeds": [0], "steps": 1}
    tracking = Tracking(f"sqlite:///{tmp_path / 'mlflow.db'}")
    exp = tracking.client.create_experiment("e", artifact_location=str(tmp_path / "art"))
    parent = tracking.client.create_run(exp).info.run_id

    def note(grpo: dict) -> str:
        run_id = tracking.start_trial(exp, parent, SweepSpec.model_validate({**base, "grpo": grpo}), "t", 2, 16, 0)
        return tracking.client.get_run(run_id).data.tags["mlflow.note.content"]

    on_policy = note({})
    assert "`clip_frac_low`, `clip_frac_high`, `momentum_overshoot_frac` (one optimizer step" in on_policy
    assert "`loss` (at ratio 1" in on_policy and "`kl` (kl_beta is 0" in on_policy
    token_mean = note({"loss_aggregation": "token_mean"})  # the loss weighs advantages by length: not 0
    assert "`loss`" not in token_mean and "`kl`" in token_mean
    off_policy = note({"inner_steps": 2, "kl_beta": 0.1})
    assert not any(k in off_policy for k in ("`loss`", "`kl`", "`clip_frac_low`")) and "reward_mean" in off_policy
    assert "`completion_tokens_mean`, `truncation_rate` (a tabular completion is one token)" in off_policy  # the bandit


def test_a_trial_run_records_its_task_as_a_dataset_input_with_the_task_keys_digest(tmp_path):
    import json

    from service.identity import task_key
    from service.tracking import Tracking
    from sweeps.spec import SweepSpec
    from workers.data import content_digest

    rows = [{"prompt": f"q{i}", "answer": str(i)} for i in range(4)]
    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    task = {"name": "dataset", "path": str(data), "label": "my-task", "rewards": [{"name": "exact_match"}]}
    base = {"name": "n", "group_sizes": [2, 4], "samples_per_step": [16]}
    tracking = Tracking(f"sqlite:///{tmp_path / 'mlflow.db'}")
    exp = tracking.client.create_experiment("e", artifact_location=str(tmp_path / "art"))
    parent = tracking.client.create_run(exp).info.run_id

    def dataset(spec: SweepSpec):
        run_id = tracking.start_trial(exp, parent, spec, "t", 2, 16, 0)
        (inp,) = tracking.client.get_run(run_id).inputs.dataset_inputs
        assert {t.key: t.value for t in inp.tags} == {"mlflow.data.context": "training"}
        return inp.dataset

    spec = SweepSpec.model_validate({**base, "task": task, "model": {"preset": "chat-tiny"}})
    got = dataset(spec)
    assert f"{got.name}:{got.digest}" == task_key(spec)  # the experiment's key, split into name and digest
    assert (got.source_type, json.loads(got.source)) == ("local", {"uri": str(data)})
    assert json.loads(got.profile)["prompt_column"] == "prompt"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows[:3]))  # other bytes: another digest
    assert dataset(spec).digest not in (got.digest, content_digest(data)[:16])

    builtin = dataset(SweepSpec.model_validate({**base, "task": {"name": "bandit"}, "model": {"preset": "tabular"}}))
    assert builtin.name == "bandit" and builtin.source_type == "code" and len(builtin.digest) == 16


def test_a_sweeps_experiment_opens_in_mlflows_model_training_view(tmp_path, monkeypatch):
    from service.tracking import Tracking

    monkeypatch.chdir(tmp_path)  # the experiment's default artifact root is ./mlruns
    from sweeps.spec import SweepSpec

    spec = {"name": "n", "task": {"name": "bandit"}, "model": {"preset": "tabular"}, "group_sizes": [2, 4]}
    spec = SweepSpec.model_validate(spec | {"samples_per_step": [16]})
    tracking = Tracking(f"sqlite:///{tmp_path / 'mlflow.db'}")
    exp_id, run_id = tracking.start_sweep("sid", spec, "bandit")
    experiment = tracking.client.get_experiment(exp_id)
    assert experiment.name == "groupscale/bandit"
    assert experiment.tags["mlflow.experimentKind"] == "custom_model_development"
    assert tracking.start_sweep("sid2", spec, "bandit")[0] == exp_id  # one experiment per task_key
    (inp,) = tracking.client.get_run(run_id).inputs.dataset_inputs  # the parent run names its dataset too
    assert inp.dataset.name == "bandit"


def test_system_metrics_are_sampled_every_5_s_by_default():
    from workers.worker import SYSTEM_METRICS_EVERY_S

    assert SYSTEM_METRICS_EVERY_S == 5  # README: every 5 s (the tests above sample faster)


@pytest.mark.slow  # 24 s of an outage: `make test` stays under 20 minutes
def test_system_metrics_go_on_after_an_mlflow_outage(tmp_path, monkeypatch):
    """MLflow's own monitor ends at its first failed request; a trial's monitor keeps its samples while the
    tracking server is down and sends them, every step once, after it is back."""
    import time

    from service.stack import start_mlflow, stop_process_group
    from tests.ports import free_port
    from workers.system_metrics import SystemMetrics

    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")  # as in a trial's worker: workers.tracking retries instead
    port = free_port()
    uri = f"http://127.0.0.1:{port}"
    server = start_mlflow(tmp_path, "127.0.0.1", port)
    client = MlflowClient(uri)
    run_id = client.create_run("0").info.run_id
    key = "system/cpu_utilization_percentage"

    def steps() -> list[int]:
        return sorted(m.step for m in client.get_metric_history(run_id, key))

    monitor = SystemMetrics(run_id, uri, sampling_interval=0.2)
    monitor.start()
    try:
        deadline = time.monotonic() + 60
        while len(steps()) < 3:
            assert time.monotonic() < deadline
            time.sleep(0.2)
        stop_process_group(server)
        time.sleep(4)  # about 20 samples while nothing answers
        server = start_mlflow(tmp_path, "127.0.0.1", port)
        restarted = time.monotonic()
        while len(steps()) < 30:
            assert time.monotonic() - restarted < 60, f"no system metrics after the outage: steps {steps()}"
            time.sleep(0.2)
        monitor.finish()
        logged = steps()
        assert logged == list(range(len(logged)))  # every step once: nothing lost in the outage, nothing twice
    finally:
        monitor.finish()
        stop_process_group(server)

"""The defaults README states (the TRL table, the probe and measure sections, the settings list, `up`) are the code's:
across the packages, so at the top of tests/."""

import pytest

from sweeps.spec import GRPOSpec, MeasureSpec, ProbeSpec, SweepSpec
from tests.factories import spec


def test_grpo_defaults_are_readmes_table():
    g = GRPOSpec()
    assert (g.lr, g.clip_eps, g.kl_beta, g.inner_steps, g.max_new_tokens, g.temperature) == (2e-4, 0.2, 0.0, 1, 4, 1.0)
    assert (g.loss_aggregation, g.advantage) == ("seq_mean_token_mean", "loo")
    assert g.clip_eps_high is None  # = clip_eps
    assert SweepSpec.model_validate(spec()).grpo == g  # a spec without grpo: gets them


def test_probe_and_measure_defaults():
    p = ProbeSpec()
    assert (p.prompts, p.completions, p.projection_dim, p.seed, p.parameters) == (256, 16, 512, 0, "all")
    assert (MeasureSpec().kind, MeasureSpec().repeats) == ("outcome", 256)


def test_settings_defaults(monkeypatch):
    pytest.importorskip("pydantic_settings")
    from service.settings import Settings

    for name in ("MAX_TRIALS", "MAX_STEPS", "TRIAL_RETRIES", "WORKER_IDLE_S", "MAX_BODY_BYTES", "PUBLIC_READS"):
        monkeypatch.delenv(f"GROUPSCALE_{name}", raising=False)
    for name in ("RAY_ROTATION_MAX_BYTES", "RAY_ROTATION_BACKUP_COUNT"):  # Ray's names are read too
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(f"GROUPSCALE_{name}", raising=False)
    s = Settings()
    assert (s.max_trials, s.max_steps, s.trial_retries, s.worker_idle_s, s.max_body_bytes) == (1000, 100_000, 2, 300.0, 1 << 20)
    assert (s.ray_rotation_max_bytes, s.ray_rotation_backup_count) == (100 << 20, 5)  # docs/operations/running.md
    assert s.public_reads is False and s.reward_root is None  # user rewards refused until the server sets a root


def test_the_mlflow_retry_window_defaults_to_five_minutes(monkeypatch):
    import importlib

    import workers.tracking

    monkeypatch.delenv("GROUPSCALE_MLFLOW_RETRY_S", raising=False)
    assert importlib.reload(workers.tracking).MLFLOW_RETRY_S == 300.0


def test_up_binds_to_the_loopback_address_by_default():
    import inspect

    from service.cli.commands import up

    params = inspect.signature(up).parameters
    assert params["host"].default == "127.0.0.1" and (params["port"].default, params["mlflow_port"].default) == (8000, 5000)


def test_clients_wait_for_up_longer_than_it_took_on_a_busy_machine(monkeypatch):
    """README: `up` answered in 15-30 s on a quiet machine and up to 49 s on a busy one; a client command waits
    GROUPSCALE_WAIT_S (default 120 s) for it to answer, so a command typed at once does not give up first."""
    from service.client import WAIT_S, Client

    monkeypatch.delenv("GROUPSCALE_WAIT_S", raising=False)
    assert WAIT_S == 120 > 49 and Client("http://127.0.0.1:9").wait_s == 120
    monkeypatch.setenv("GROUPSCALE_WAIT_S", "300")
    assert Client("http://127.0.0.1:9").wait_s == 300

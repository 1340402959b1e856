"""What tests build specs from: the smallest valid spec of each kind, any field replaced (``spec(steps=20)``).

Tests import these instead of keeping their own copies (and never import helpers from other test modules).
"""

from __future__ import annotations

from typing import Any

ARITHMETIC: dict[str, Any] = {
    "name": "t",
    "task": {"name": "arithmetic"},
    "model": {"preset": "tiny-llama"},
    "group_sizes": [2, 4],
    "samples_per_step": [16],
    "seeds": [0],
    "steps": 5,
}
BANDIT: dict[str, Any] = {  # the quickest real sweep: two bandit trials of 20 steps on the tabular policy (seconds each)
    "name": "e2e-bandit",
    "task": {"name": "bandit"},
    "model": {"preset": "tabular"},
    "group_sizes": [2, 4],
    "samples_per_step": [16],
    "seeds": [0],
    "steps": 20,
}
BANDIT_MSE: dict[str, Any] = {
    "name": "t",
    "task": {"name": "bandit"},
    "model": {"preset": "tabular"},
    "group_sizes": [2, 4],
    "samples_per_step": [8],
    "seeds": [0, 1],
    "steps": 1,
    "measure": {"kind": "gradient_mse", "repeats": 10},
}


def spec(**over: Any) -> dict[str, Any]:
    """The arithmetic spec (tiny-llama, G 2 and 4, B 16, one seed, 5 steps) with ``over`` replacing its fields."""
    return {**ARITHMETIC, **over}


def bandit_spec(**over: Any) -> dict[str, Any]:
    """The bandit's outcome spec (tabular, G 2 and 4, B 16, one seed, 20 steps) with ``over`` replacing its fields."""
    return {**BANDIT, **over}


def bandit_mse_spec(**over: Any) -> dict[str, Any]:
    """The bandit's gradient-MSE spec (tabular, G 2 and 4, B 8, two seeds, 10 draws) with ``over`` replacing fields."""
    return {**BANDIT_MSE, **over}


def tiny_arithmetic_lm(folder):
    """A tiny-llama (seed 0) with the arithmetic character tokenizer, saved to ``folder`` and loaded as an LMPolicy."""
    from workers.models.loading import load_lm
    from workers.models.presets import build_char_tokenizer, tiny_llama

    tok = build_char_tokenizer("0123456789+=")
    tiny_llama(tok, 0).save_pretrained(folder)
    tok.save_pretrained(folder)
    return load_lm(folder)


class Killed(BaseException):
    """A worker killed mid-trial (nothing in the trainer catches it)."""


def killed_and_resumed(config, tmp_path, killed_seen=None):
    """The same trial twice with checkpoints: straight through (under tmp_path/straight), and killed at its step 5 report
    then run again (under tmp_path/killed); ``config(checkpoint_dir=...)`` builds it, ``killed_seen(folder)`` looks at
    the checkpoint the kill left. Returns (straight result, resumed result, the resumed run's (step, metrics) reports)."""
    import pytest

    from workers.engines.groupscale import train_trial

    straight = train_trial(config(checkpoint_dir=str(tmp_path / "straight")))

    def die_at_5(metrics, step):
        if step == 5 and "reward_mean" in metrics:
            raise Killed

    cfg = config(checkpoint_dir=str(tmp_path / "killed"))
    with pytest.raises(Killed):
        train_trial(cfg, die_at_5)
    if killed_seen is not None:
        killed_seen(tmp_path / "killed")
    reports: list = []
    resumed = train_trial(cfg, lambda m, s: reports.append((s, m)))
    return straight, resumed, reports

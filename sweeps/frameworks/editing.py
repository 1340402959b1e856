"""``recommend --config FILE``: the user's own config or run script with the measured G, only G and the keys tied to it
at the file's budget changed, refused when the sweep measured another objective than the file trains."""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path
from typing import Any

from sweeps.frameworks.base import Budget, Framework
from sweeps.frameworks.importing import read_budget

# the objective in the budget vocabulary: a G measured under other values of these is not the file's G
OBJECTIVE = ("steps_per_generation", "inner_steps", "loss_aggregation", "advantage", "importance_sampling_level",
             "clip_eps", "clip_eps_high", "kl_beta", "temperature")  # fmt: skip


class ObjectiveDiffers(ValueError):
    """The sweep measured G for another objective than the file trains; the message lists each setting that differs."""


def file_budget(framework: Framework, path: Path, overrides: tuple[str, ...] = ()) -> Budget:
    """The file's G, B and objective (sweeps.frameworks.importing.read_budget). Raises ValueError (Refused too)."""
    return read_budget(framework, path, list(overrides))[1]


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float, Fraction)) and isinstance(b, (int, float, Fraction)) and not isinstance(a, bool):
        return math.isclose(float(a), float(b), rel_tol=1e-9)
    return a == b


def differences(measured: dict[str, Any], trains: dict[str, Any]) -> list[str]:
    """The OBJECTIVE settings where the sweep's objective (``measured``) and the file's (``trains``) differ, in words;
    an unset upper clip is the lower one."""

    def value(grpo: dict[str, Any], key: str) -> Any:
        return grpo.get("clip_eps") if key == "clip_eps_high" and grpo.get(key) is None else grpo.get(key)

    return [
        f"{key}: the sweep measured {value(measured, key)}, the file trains {value(trains, key)}"
        for key in OBJECTIVE
        if key in trains and not _same(value(measured, key), value(trains, key))
    ]


def edit_config(framework: Framework, path: Path, group_size: int, measured: dict[str, Any], budget: Budget) -> str:
    """The file at ``path`` with G = ``group_size`` at its own B (``budget``: file_budget's), the keys tied to G moved
    with it (Framework.tied) and nothing else.

    Raises:
        ObjectiveDiffers: the sweep's objective ``measured`` (the budget vocabulary) is not the file's.
        Refused: the trainer cannot express G at the file's B (e.g. mini-batches of whole prompts).
    """
    differ = differences(measured, budget.grpo)
    if differ:
        raise ObjectiveDiffers(
            "the sweep measured G for another objective than the file trains (" + "; ".join(differ) + "): its G is not "
            "this file's; sweep the file's own objective (spec from-" + framework.name + ") or export without --config"
        )  # fmt: skip
    Budget(group_size, budget.samples_per_step, budget.grpo).check()  # G must fill the file's B and its k steps
    settings = framework.settings(group_size, budget.samples_per_step, {**measured, **budget.grpo})
    return framework.edit(path, path.read_text(), {k: v for k, v in settings.items() if k in framework.tied})

"""The checks at submit that run where trials run, on a Ray worker of the cluster: a dataset task's rewards (loaded,
called on the data's first rows and on their reference answers, reward servers asked once) and the engine's own check
(engine trl: its GRPOConfig). What needs no cluster is service.preflight's."""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from service.preflight import SpecError
from sweeps.engines import get_engine
from sweeps.spec import SweepSpec
from workers.entry import check_rewards_task, needs_process

log = logging.getLogger("groupscale.preflight")


REWARD_CHECK_S = 60.0  # the reward check at submit: loading and calling every reward on the cluster


def check_rewards_on_cluster(spec: SweepSpec, run_task: Callable[[Any, tuple, float], Any]) -> list[str]:
    """Run a dataset task's user reward functions, reward servers (and math_verify) once where user code may run,
    before anything is scheduled: workers.entry.check_rewards_task on the cluster (``run_task``: Cluster.run_task).
    Returns notes: the convention ``auto`` took for each function entry that left it to auto.

    Raises:
        SpecError: a reward cannot be imported (a missing package named with its pip command and the row that
            reached it), its factory fails, it has a wrong signature or return shape, it scores no checked row's
            reference answer (a built-in's, a verl scorer's: workers.rewards.reference), or the check took longer
            than REWARD_CHECK_S.
    """
    task = spec.task
    if task.name != "dataset" or not needs_process([r.model_dump() for r in task.rewards]):
        return []
    try:
        failure = run_task(check_rewards_task, (task.model_dump(), REWARD_CHECK_S - 5, spec.steps), REWARD_CHECK_S)
    except TimeoutError:
        raise SpecError(
            ("task", "rewards"),
            f"the reward functions were not loaded and called on the data's first rows within {REWARD_CHECK_S:g} s on the "
            "cluster: a reward's import or call is too slow, or the cluster cannot start a worker",
        ) from None
    except Exception:  # noqa: BLE001 - the cluster failed, not the spec: accepted, and a trial reports a bad reward
        log.warning("the reward check could not run on the cluster; the sweep is accepted unchecked", exc_info=True)
        return []
    if "message" in failure:
        index = failure["index"]
        loc = (
            ("task", "rewards")
            if index is None
            else ("task", "rewards", index, next(f for f in ("function", "url", "name") if getattr(task.rewards[index], f)))
        )
        called = failure.get("with", "placeholder completions")
        raise SpecError(loc, f"{failure['message']} (checked on the data's first rows, one of each data_source, with {called})")
    return [
        f"task.rewards[{i}]: convention auto calls {r.function} as {took}'s reward (convention: {took})"
        for i, (r, took) in enumerate(zip(task.rewards, failure["conventions"]))
        if r.function and r.convention == "auto"
    ]


ENGINE_CHECK_S = 120.0  # an engine's check at submit on the cluster (engine trl: importing TRL, building its GRPOConfig)


def check_engine_on_cluster(spec: SweepSpec, run_task: Callable[[Any, tuple, float], Any], cache_dir: Path) -> None:
    """The spec engine's ``cluster_check`` where trials run, before anything is scheduled (sweeps.engines: engine trl
    builds the recipe's GRPOConfig and looks for the packages it names).

    Raises:
        SpecError: at the engine's section, or the field of it that the check's message names first, or when the check
            took longer than ENGINE_CHECK_S.
    """
    engine = get_engine(spec.engine)
    if engine.cluster_check is None:
        return
    module, name = engine.cluster_check.split(":")
    check = getattr(importlib.import_module(module), name)
    section = (engine.section or "engine",)
    try:
        failure = run_task(check, (spec.model_dump(mode="json"), str(cache_dir)), ENGINE_CHECK_S)
    except TimeoutError:
        raise SpecError(section, f"{engine.checks} was not checked within {ENGINE_CHECK_S:g} s on the cluster") from None
    except Exception:  # noqa: BLE001 - the cluster failed, not the spec: accepted, and a trial reports a bad recipe
        log.warning("engine %s's check could not run on the cluster; the sweep is accepted unchecked", engine.name, exc_info=True)
        return
    if failure is not None:
        loc = (*section, failure["field"]) if failure["field"] else section
        raise SpecError(loc, f"{failure['message']} (checked on a Ray worker, where trials run)")

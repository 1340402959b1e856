"""The controller's Ray backend: the only module of the controller that imports ray.

The scheduler's loop talks to a ``Backend`` (service.scheduler.jobs): start a trial as a detached,
named actor or a probe / lr tuning as a task, wait for any of them, read a result, stop one, say
what is free. This module is that interface on a real Ray cluster; the loop's unit tests use a fake.
"""

from __future__ import annotations

import re
from typing import Any

import ray

from service.settings import Settings

NAMESPACE = "groupscale"  # named detached actors are found again by a restarted controller in it
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def trial_actor_name(trial_id: str) -> str:
    return f"trial-{trial_id}"


def connect_ray(settings: Settings) -> bool:
    """Join the cluster at RAY_ADDRESS, or start a local head on loopback. Returns True if local.

    Call it from the main thread before the web server installs its signal handlers: ray.init
    replaces the process's SIGTERM handler, and the server's must win so that SIGTERM shuts the
    stack down cleanly.
    """
    if settings.ray_address:
        ray.init(address=settings.ray_address, namespace=NAMESPACE, log_to_driver=False)
        return False
    # address="local": always a new head, never a cluster that `ray start` left on this machine.
    ray.init(
        address="local",
        num_cpus=settings.ray_num_cpus,
        namespace=NAMESPACE,
        include_dashboard=False,
        log_to_driver=False,
        _node_ip_address="127.0.0.1",
    )
    return True


def disconnect_ray() -> None:
    if ray.is_initialized():
        ray.shutdown()


class RayBackend:
    """Backend on Ray. Handles are Ray ObjectRefs of a trial actor's ``wait`` or of a task's result."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._connected = False  # this object called ray.init (so it calls ray.shutdown)

    # -- the connection ----------------------------------------------------------------------
    def connect(self) -> None:
        if not ray.is_initialized():  # `groupscale up` connects before the web server starts
            connect_ray(self.settings)
            self._connected = True

    def disconnect(self) -> None:
        if self._connected:
            disconnect_ray()

    def connected(self) -> bool:
        return ray.is_initialized()

    def total_resources(self) -> dict[str, float]:
        return dict(ray.cluster_resources()) if ray.is_initialized() else {}

    def available_resources(self) -> dict[str, float]:
        """What the cluster has free now, other users' work on a shared cluster included."""
        return dict(ray.available_resources()) if ray.is_initialized() else {}

    # -- work ------------------------------------------------------------------------------------
    def start_trial(self, name: str, args: tuple, cpus: float, gpus: float) -> Any:
        """A detached, named TrialRunner actor (it outlives the controller) and its ``wait`` ref.

        A dead worker (not an exception in the trial) is restarted by Ray at most trial_retries times,
        resuming from the trial's last checkpoint; the pending wait() is retried on the restarted actor
        (max_task_retries=-1, bounded by the restarts).
        """
        from workers.entry import TrialRunner

        runner = ray.remote(TrialRunner).options(
            name=name,
            lifetime="detached",
            get_if_exists=True,
            num_cpus=cpus,
            num_gpus=gpus,
            max_restarts=self.settings.trial_retries,
            max_task_retries=-1,
            max_concurrency=4,
        )
        return runner.remote(*args).wait.remote()

    def attach_trial(self, name: str) -> Any | None:
        """The ``wait`` ref of a named trial actor that is alive, or None when it is gone or dead.

        Alive means it answers: a dead actor's handle can still be found by name for a while, and
        trusting it would turn a lost worker into ``failed: RayActorError`` instead of a resume.
        """
        try:
            actor = ray.get_actor(name)
            ray.get(actor.wait.remote(0.0), timeout=30)  # None while the trial runs; its result once done
        except ray.exceptions.GetTimeoutError:  # restarting: Ray answers once the restarted actor is up
            return actor.wait.remote()
        except (ValueError, ray.exceptions.RayActorError):  # never existed, or dead (restarts used up)
            return None
        except Exception:  # noqa: BLE001 - the trial's own error: wait() raises it again for collect
            pass
        return actor.wait.remote()

    def trial_names(self) -> set[str]:
        """Names of the trial actors alive in this namespace."""
        return {n for n in ray.util.list_named_actors() if n.startswith("trial-")}

    def start_task(self, fn: Any, args: tuple, cpus: float, gpus: float, retries: int) -> Any:
        """A Ray task (a probe, an lr tuning): retried ``retries`` times if its worker dies, never on an
        exception of its own."""
        return ray.remote(fn).options(num_cpus=cpus, num_gpus=gpus, max_retries=retries, retry_exceptions=False).remote(*args)

    def wait(self, handles: list[Any], timeout_s: float) -> list[Any]:
        """The handles whose work has ended, after at most timeout_s."""
        ready, _ = ray.wait(handles, num_returns=len(handles), timeout=timeout_s)
        return ready

    def result(self, handle: Any) -> Any:
        """The work's return value. Raises: the work's own exception, or Ray's when its worker died."""
        return ray.get(handle)

    def kill_trial(self, name: str) -> None:
        try:
            ray.kill(ray.get_actor(name), no_restart=True)
        except ValueError:  # already gone
            pass

    def cancel(self, handle: Any) -> None:
        ray.cancel(handle, force=True)

    @staticmethod
    def describe(e: BaseException) -> tuple[str, bool]:
        """(One line for users: the worker's own exception, not Ray's wrapper; True if the worker died)."""
        died = isinstance(e, ray.exceptions.RayActorError | ray.exceptions.WorkerCrashedError)
        cause = getattr(e, "cause", None) or e
        first = (_ANSI.sub("", str(cause)).strip().splitlines() or [""])[0]
        return f"{type(cause).__name__}: {first}"[:1000], died

"""A trial's ranks on Ray: ranks 1..P-1 as actors in the trial's placement group, started and watched by rank 0.

A trial of P processes is one Ray placement group of P bundles (service.scheduler.ray_backend makes it, strategy
PACK: one node when one holds them all, else spread over nodes). Rank 0 is the trial's TrialWorker, in bundle 0; it
starts the other ranks here, one actor in each other bundle, owned by rank 0 (so they end with it). All of them join
one torch.distributed group at rank 0's address (workers.distributed.join) and run the same trainer; rank 0 alone
logs to MLflow and writes the checkpoint.

A rank that dies (its node lost, its process killed) closes its connections, so rank 0's next collective raises;
rank 0 then ends its own process, and Ray restarts the TrialWorker, which resumes the trial from its checkpoint with
new ranks (workers.worker.TrialWorker). A rank whose trainer raises, or fails alone, fails the trial with its error.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from typing import Any

from sweeps.trial import TrialConfig, TrialOutcome, TrialResult
from workers.distributed import join, leave, rendezvous
from workers.engines.base import Placement
from workers.measures import run_measure

log = logging.getLogger("groupscale.ranks")
RANK_DIED_EXIT = 75  # rank 0's exit status when another rank died: its worker restarts and resumes the trial


class RankFailed(RuntimeError):
    """A rank > 0 whose trainer ended ``failed`` (its process is then stopped, so rank 0 does not wait for it)."""


class RankWorker:
    """Rank r > 0 of one trial (a Ray actor in its bundle): joins the group and trains; reports go nowhere."""

    def run(self, config: dict[str, Any], master: str, rank: int, world_size: int) -> None:
        """Raises RankFailed when its trainer ended ``failed``: alone, rank 0 would wait for it in a collective;
        with the others (a failure they agreed on), rank 0's own result says the same."""
        cfg = TrialConfig(**config)
        placement = Placement(rank, world_size, cfg.device)  # this process's role, decided here once
        join(master, placement)
        try:
            result = run_measure(cfg, lambda metrics, step: None, placement)
        finally:
            leave()
        if result.status is TrialOutcome.FAILED:
            raise RankFailed(f"rank {rank} of {world_size}: {result.reason}")


SETTLE_S = 60.0  # after rank 0's trainer raised, how long the other ranks' calls may take to end (a node's loss included)


class _Watch:
    """The other ranks' ``run`` calls. The first that raises is kept (``error``) and its rank stopped: its process then
    closes its connections, so the collective rank 0 waits in raises instead of waiting for a rank that will not come.
    A rank whose process ended without being stopped here died (``died``)."""

    def __init__(self, refs: list[Any], handles: list[Any]) -> None:
        self.refs, self.handles = refs, handles
        self.error: BaseException | None = None
        self._killed: set[int] = set()
        self._stop = threading.Event()
        threading.Thread(target=self._watch, name="ranks", daemon=True).start()

    def _watch(self) -> None:
        import ray

        pending = list(self.refs)
        while pending and not self._stop.is_set():
            ready, pending = ray.wait(pending, num_returns=1, timeout=1.0)
            for ref in ready:
                try:
                    ray.get(ref)
                except ray.exceptions.RayActorError as e:  # its process is gone already: nothing to stop
                    self.error = e
                    return
                except BaseException as e:  # noqa: BLE001 - a rank's own error, handed to rank 0
                    self.error = e
                    self._kill(self.refs.index(ref))
                    return

    def _kill(self, i: int) -> None:
        import ray

        self._killed.add(i)
        ray.kill(self.handles[i], no_restart=True)

    def settle(self, timeout_s: float) -> None:
        """Wait until every rank's call has ended, at most ``timeout_s``."""
        import ray

        ray.wait(self.refs, num_returns=len(self.refs), timeout=timeout_s)

    def died(self) -> bool:
        """Whether a rank's process ended that was not stopped here (its node lost, its process killed)."""
        import ray

        ready, _ = ray.wait(self.refs, num_returns=len(self.refs), timeout=0)
        for i, ref in enumerate(self.refs):
            if ref in ready and i not in self._killed:
                try:
                    ray.get(ref)
                except ray.exceptions.RayActorError:
                    return True
                except BaseException:  # noqa: BLE001 - an error of its own (or another rank's loss, seen from it)
                    continue
        return False

    def stop(self) -> None:
        """Stop every rank still running, and the watch."""
        self._stop.set()
        for i in range(len(self.handles)):
            if i not in self._killed:
                self._kill(i)


def run_with_ranks(cfg: TrialConfig, placement: Placement, train: Callable[[], TrialResult]) -> TrialResult:
    """Start ranks 1..P-1 of ``cfg`` in this actor's placement group, join them as rank 0 (``placement``) and
    ``train()`` (rank 0's run of the trainer); its result is the trial's. A failed result is returned as it is (the
    ranks failed with it, or rank 0 alone); a rank that failed or raised alone raises its error here; when a rank
    died, this process ends (exit RANK_DIED_EXIT) so that Ray restarts the trial's worker, which resumes from the
    checkpoint.

    Raises:
        RuntimeError: this actor is not in a placement group of cfg.num_processes bundles.
    """
    import ray
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    pg, p = ray.util.get_current_placement_group(), cfg.num_processes
    if pg is None or len(pg.bundle_specs) != p:
        raise RuntimeError(f"a trial of num_processes={p} runs in a placement group of {p} bundles (the controller's)")
    store, master = rendezvous(ray.util.get_node_ip_address(), p)  # rank 0's port, held until the trial ends
    remote = ray.remote(RankWorker)
    handles = [
        remote.options(
            num_cpus=pg.bundle_specs[r].get("CPU", 0.0),
            num_gpus=pg.bundle_specs[r].get("GPU", 0.0),
            scheduling_strategy=PlacementGroupSchedulingStrategy(pg, placement_group_bundle_index=r),
            max_restarts=0,
        ).remote()
        for r in range(1, p)
    ]
    watch = _Watch([h.run.remote(cfg.to_dict(), master, r, p) for r, h in enumerate(handles, start=1)], handles)
    try:
        join(master, placement, store=store)
        result = train()
        if result.status is not TrialOutcome.FAILED:
            ray.get(watch.refs)  # every rank ends its last step with rank 0; a rank's own failure is the trial's
        return result
    except BaseException:
        first = watch.error  # a rank's error from before rank 0's own: the cause
        leave()  # the other ranks' collectives end now
        watch.settle(SETTLE_S)
        if watch.died():
            log.warning("a rank of the trial died: its worker restarts and resumes the trial from its checkpoint")
            os._exit(RANK_DIED_EXIT)
        if first is not None:
            raise first from None
        raise
    finally:
        watch.stop()
        leave()

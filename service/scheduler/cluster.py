"""The cluster as the scheduler sees it: its alive nodes and their resources (read again every RESOURCES_TTL_S), the
warm workers' pool, and a check at submit run as a cluster task."""

from __future__ import annotations

import time
from typing import Any

from service.scheduler.context import Backend

RESOURCES_TTL_S = 5.0  # the cluster's total resources are read again after this long


class Cluster:
    """The backend's nodes, resources and pool, cached (``read_at``: when they were last read)."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self._resources: dict[str, float] = {}
        self._nodes: list[dict[str, float]] = []
        self.read_at = 0.0

    def resources(self) -> dict[str, float]:
        """Total cluster resources (cached for RESOURCES_TTL_S)."""
        self._read()
        return self._resources

    def nodes(self) -> list[dict[str, float]]:
        """Each alive node's total resources (cached for RESOURCES_TTL_S): a trial's shape must fit one of them."""
        self._read()
        return self._nodes

    def _read(self) -> None:
        """The alive nodes, once per RESOURCES_TTL_S; the cluster's totals are their sum (Ray's cluster_resources)."""
        if time.monotonic() - self.read_at > RESOURCES_TTL_S or not self._resources:
            self._nodes = self.backend.nodes() if self.backend.connected() else []
            totals: dict[str, float] = {}
            for node in self._nodes:
                for key, value in node.items():
                    totals[key] = totals.get(key, 0.0) + value
            self._resources = totals
            self.read_at = time.monotonic()

    def pool(self) -> dict[str, int]:
        """The warm workers: how many run a trial, are idle, or are still starting."""
        return self.backend.pool() if self.backend.connected() else {}

    def run_task(self, fn: Any, args: tuple, timeout_s: float) -> Any:
        """``fn(*args)`` as a cluster task that holds no CPU or GPU (a check at submit), its return value.

        Raises:
            TimeoutError: it did not end within timeout_s (it is cancelled).
            Exception: the task's own error, or Ray's when its worker died.
        """
        handle = self.backend.start_task(fn, args, 0, 0, 0)
        if not self.backend.wait([handle], timeout_s):
            self.backend.cancel(handle)
            raise TimeoutError(f"the cluster task did not end within {timeout_s:g} s")
        return self.backend.result(handle)

    def healthy(self) -> bool:
        return self.backend.connected() and bool(self.resources().get("CPU"))

"""Free TCP ports on 127.0.0.1 for the servers the tests start, chosen outside the kernel's ephemeral range.

A port the kernel hands out for ``bind(("127.0.0.1", 0))`` lies in the ephemeral range, which every
outgoing connection (an HTTP client, MLflow's, Ray's gRPC) and every port-0 listener (Ray's raylet,
workers and agents) also draws from: between the pick and the server's own bind one of them can take
it ("address already in use", seen under load). Ports below the range and above Ray's worker ports
(10002-19999 by default) are taken only by servers that ask for them by number.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

RAY_WORKER_PORTS_MAX = 19_999  # ray start's default --max-worker-port
_rng = random.Random()  # not seeded: concurrent test processes must not walk the same sequence


def _ephemeral_range() -> tuple[int, int]:
    try:
        lo, hi = (int(v) for v in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
        return lo, hi
    except (OSError, ValueError):
        return 32_768, 60_999  # Linux's default


def free_port() -> int:
    """A port between Ray's worker ports and the ephemeral range that nothing listens on now.

    Raises:
        RuntimeError: no free port found in 200 tries.
    """
    lo, _ = _ephemeral_range()
    first = RAY_WORKER_PORTS_MAX + 1
    if lo - first < 1000:  # an unusual ephemeral range: fall back to the kernel's choice
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]
    for _ in range(200):
        port = _rng.randrange(first, lo)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {first}..{lo - 1} after 200 tries")

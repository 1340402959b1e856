"""A trial on several processes: the groups each rank trains on, and the sums and gradients its ranks share.

The ranks of one trial form a torch.distributed process group (gloo on CPU, NCCL on GPU) set up before training;
without one every function here is the one-process identity. The split keeps groups whole (a group's G completions
share one prompt and one baseline: its advantages are computed before the split, on the whole batch), and every
loss aggregation of workers.algos is a sum over completions divided by a step-level constant, so with the step's
global counts each rank's loss is its share of the one-process loss, and the summed gradients are the one-process
gradient (THEORY.md: the step's estimator does not depend on how its B completions are laid out over processes).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import torch.distributed as dist

if TYPE_CHECKING:
    from workers.engines.base import Placement

COLLECTIVE_TIMEOUT_S = 3 * 3600.0  # a rank waits this long for the others (rank 0's held-out evaluation included)


def rendezvous(host: str, world_size: int, timeout_s: float = COLLECTIVE_TIMEOUT_S) -> tuple[dist.TCPStore, str]:
    """Rank 0's rendezvous: a TCPStore listening on ``host`` at a port the OS chose, held from its choice until the
    store is dropped (a port found free, released and bound again later can be taken between: EADDRINUSE), and its
    address ``tcp://host:port`` for the other ranks. Keep the store until the group is left."""
    store = dist.TCPStore(host, 0, world_size, is_master=True, timeout=timedelta(seconds=timeout_s), wait_for_workers=False)
    return store, f"tcp://{host}:{store.port}"


def join(master: str, placement: Placement, timeout_s: float = COLLECTIVE_TIMEOUT_S, store: dist.Store | None = None) -> None:
    """Join a trial's process group at ``master`` (``tcp://host:port``, rank 0's rendezvous) as ``placement``'s rank of
    its world_size: NCCL on CUDA (each rank's one visible GPU), gloo on CPU. Rank 0 passes the ``store`` of
    ``rendezvous``; the others connect to it (without a store, rank 0 listens at ``master``'s port). A rank that dies
    closes its connections, and the others' next collective raises (RuntimeError) instead of waiting ``timeout_s``."""
    backend = "nccl" if placement.device == "cuda" else "gloo"
    if placement.device == "cuda":
        torch.cuda.set_device(0)  # Ray shows each rank its own GPU as device 0
    timeout = timedelta(seconds=timeout_s)
    if store is None:
        host, _, port = master.removeprefix("tcp://").rpartition(":")
        store = dist.TCPStore(host, int(port), placement.world_size, is_master=placement.is_main, timeout=timeout)
    dist.init_process_group(backend, store=store, rank=placement.rank, world_size=placement.world_size, timeout=timeout)


def leave() -> None:
    """Leave the trial's process group (nothing without one): a warm process can join the next trial's."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def accelerate_env(placement: Placement) -> dict[str, str]:
    """The environment that makes accelerate (TRL's Trainer) use this process group: its rank and size (accelerate
    sees a group already initialised and keeps it; each Ray rank has one GPU, device 0)."""
    rank, size = str(placement.rank), str(placement.world_size)
    return {"RANK": rank, "WORLD_SIZE": size, "LOCAL_RANK": rank, "LOCAL_WORLD_SIZE": size}


def _world_size() -> int:
    """The ranks of this process's trial group: 1 without one (the collectives below are then the identity)."""
    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


def seed_rank(seed: int, rank: int) -> None:
    """Give rank r > 0 a sampling RNG of its own (from (seed, r)), after the model is built from ``seed`` on every rank
    (the same weights and LoRA initialisation); rank 0 keeps ``seed``'s stream, so one process is unchanged."""
    if rank:
        torch.manual_seed(int(np.random.SeedSequence([seed, rank]).generate_state(1, dtype=np.uint64)[0]))


def rank_groups(n_groups: int, rank: int, world_size: int) -> slice:
    """The groups (prompts) rank ``rank`` of ``world_size`` trains on: consecutive, whole, as even as possible (the
    first ``n_groups % world_size`` ranks take one more).

    Raises:
        ValueError: fewer groups than ranks (a rank would hold none): B / G must be at least world_size.
    """
    if n_groups < world_size:
        raise ValueError(f"{n_groups} groups (B / G) cannot be split over {world_size} processes: each needs one at least")
    base, extra = divmod(n_groups, world_size)
    start = rank * base + min(rank, extra)
    return slice(start, start + base + (1 if rank < extra else 0))


def all_sum(values: list[float]) -> list[float]:
    """Each value summed over the trial's ranks (float64); the values themselves on one process."""
    if _world_size() == 1:
        return list(values)
    t = torch.tensor(values, dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return t.tolist()


def sum_gradients(params: Iterable[torch.nn.Parameter]) -> None:
    """Replace each trainable parameter's gradient by its sum over the ranks (a rank that left one without a
    gradient adds zeros: every rank makes the same collective calls in the same order)."""
    if _world_size() == 1:
        return
    for p in params:
        if not p.requires_grad:
            continue
        if p.grad is None:
            p.grad = torch.zeros_like(p)
        dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)


def all_gather(obj: Any) -> list[Any]:
    """Each rank's ``obj`` (picklable: a few numbers, a small tensor), in rank order; ``[obj]`` on one process."""
    world_size = _world_size()
    if world_size == 1:
        return [obj]
    parts: list[Any] = [None] * world_size
    dist.all_gather_object(parts, obj)
    return parts


def all_rows(t: torch.Tensor) -> torch.Tensor:
    """The step's (N, ...) tensor on every rank from each rank's rows (its groups, rank_groups order); ``t`` itself on
    one process. For small per-group values (rewards, values): advantages that normalise over the batch see it all."""
    return t if _world_size() == 1 else torch.cat([part.to(t.device) for part in all_gather(t.cpu())])


def first_failure(failure: Any) -> Any:
    """The failure of the lowest rank that had one (None when none had): every rank learns of it at the same point, so
    all stop together instead of the others waiting on a collective the failed one never reaches."""
    return next((f for f in all_gather(failure) if f is not None), None)


SUMMED = ("tokens_per_s",)  # the trial's throughput: the ranks' own add up
# a step waits for its slowest rank; the realized group sizes' extremes are over every rank's groups
MAXED = ("cuda_max_memory_gib", "time_generate_s", "time_score_s", "time_update_s", "realized_group_size_max")
MINNED = ("realized_group_size_min",)


def reduce_metrics(metrics: dict[str, float], completions: float) -> dict[str, float]:
    """One step's metrics over the ranks, each rank's computed on its own ``completions``: SUMMED summed, MAXED the
    maximum, MINNED the minimum, any other the mean over the ranks that have it weighted by their completions (a mean
    over completions, tokens or groups alike: every group has G completions). The metrics themselves on one process."""
    if _world_size() == 1:
        return metrics
    parts = all_gather((metrics, completions))
    out: dict[str, float] = {}
    folds = {**dict.fromkeys(SUMMED, sum), **dict.fromkeys(MAXED, max), **dict.fromkeys(MINNED, min)}
    for key in dict.fromkeys(k for m, _ in parts for k in m):
        have = [(m[key], w) for m, w in parts if key in m]
        fold = folds.get(key)
        out[key] = fold(v for v, _ in have) if fold else sum(v * w for v, w in have) / max(sum(w for _, w in have), 1e-12)
    return out

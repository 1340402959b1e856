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

import torch
import torch.distributed as dist

from workers.batch import Batch


def world() -> tuple[int, int]:
    """(rank, world_size) of this process: (0, 1) without a process group."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


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


def shard(batch: Batch, rank: int, world_size: int) -> Batch:
    """The part of a step's batch (N groups of G, advantages already computed on all of it) that ``rank`` trains on."""
    groups = rank_groups(len(batch.problems), rank, world_size)
    g = batch.rewards.shape[1]
    rows = slice(groups.start * g, groups.stop * g)
    return Batch(
        problems=batch.problems[groups],
        rollout=batch.rollout.rows(rows),
        rewards=batch.rewards[groups],
        advantages=batch.advantages[rows],
        seconds_generate=batch.seconds_generate,
        seconds_score=batch.seconds_score,
        reward_metrics=dict(batch.reward_metrics),
    )


def all_sum(values: list[float]) -> list[float]:
    """Each value summed over the trial's ranks (float64); the values themselves on one process."""
    if world()[1] == 1:
        return list(values)
    t = torch.tensor(values, dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return t.tolist()


def sum_gradients(params: Iterable[torch.nn.Parameter]) -> None:
    """Replace each trainable parameter's gradient by its sum over the ranks (a rank that left one without a
    gradient adds zeros: every rank makes the same collective calls in the same order)."""
    if world()[1] == 1:
        return
    for p in params:
        if not p.requires_grad:
            continue
        if p.grad is None:
            p.grad = torch.zeros_like(p)
        dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)

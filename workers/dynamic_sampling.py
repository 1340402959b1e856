"""DAPO's dynamic sampling in groupscale's trainer: one step's generations of N prompts until N informative groups.

Sources: DAPO (Yu et al., arXiv 2503.14476, sec. 3.2 "Dynamic Sampling": over-sample and drop the prompts whose
accuracy is 0 or 1 until the batch is full of prompts with accuracy strictly between); verl's recipe/dapo,
``algorithm.filter_groups`` (enable, metric, max_num_gen_batches; volcengine/verl at b178a3cd, docs/algo/dapo.md and
verl/trainer/config/algorithm.py ``FilterGroupsConfig``): it keeps the groups whose metric varies within the group,
samples another generation while fewer than train_batch_size prompts are kept, cuts the batch to train_batch_size,
and raises once max_num_gen_batches generations are spent.

groupscale's rule (``grpo.dynamic_sampling.max_batches``):

- each generation samples N = B / G prompts x G completions (workers.batch.sample_batch: advantages over its N groups);
- a group is informative when its G rewards (the trained reward, as the task gives it) are not all equal; the others
  have zero advantage under loo, mean, mean_std and loo_std (the spec refuses oracle) and are dropped;
- informative groups are kept in sampling order until N are held (the last generation's cut there) or max_batches
  generations are spent; a step short of N trains the groups it holds (verl raises there), and with none it makes no
  update but still counts as a step and logs;
- on several processes each rank keeps its own share of N (its ``rank_groups`` of every generation) and the ranks
  sample together (the prompt RNG and the advantages' gather stay shared) until every rank's share is full; a short
  step trains on every rank the fewest groups any rank kept, rounded down to a multiple of k = steps_per_generation
  (one process: what it kept, rounded down so), so the ranks' steps and Generation's k mini-batches stay whole.

The filled batch is then the generation (workers.batch.Generation splits it into k mini-batches, mu passes). Every loss
aggregation normalises over the rows it trains (workers.algos.aggregate_loss), so the kept groups are normalised as a
batch of their size: with loo the gradient is the unfiltered batch's times N_sampled / N_kept (a dropped group's
advantages, hence its loss, are exactly zero). Every generation draws from the trial's RNGs inside its step, before
any checkpoint, so a resumed trial samples the same ones.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import torch

from workers.batch import Batch
from workers.distributed import all_gather, all_sum
from workers.rollout import Rollout


def max_batches(grpo: Any) -> int | None:
    """grpo.dynamic_sampling.max_batches of a GRPOSpec (a trial config carries the section as a dict); None when off."""
    section = grpo.dynamic_sampling
    if section is None:
        return None
    return int(section["max_batches"] if isinstance(section, dict) else section.max_batches)


def informative_groups(rewards: torch.Tensor) -> torch.Tensor:
    """(N,) bool: the groups of ``rewards`` (N, G) float32 whose G rewards are not all equal (DAPO: 0 < accuracy < 1)."""
    return rewards.amax(dim=1) != rewards.amin(dim=1)


def select_groups(batch: Batch, groups: list[int]) -> Batch:
    """The groups ``groups`` (indices into a uniform batch's N, in that order): their problems, completions, rewards
    and advantages (each group Batch.rows, joined by concat)."""
    g = batch.rewards.shape[1]
    return concat([batch.rows(slice(i * g, (i + 1) * g)) for i in groups])


def concat(parts: list[Batch]) -> Batch:
    """The groups of several batches (generations), in order, as one; completions padded to the widest
    (Rollout.concat). Seconds and reward metrics are the first part's (fill sets the step's)."""
    if len(parts) == 1:
        return parts[0]
    return replace(
        parts[0],
        problems=[p for b in parts for p in b.problems],
        rollout=Rollout.concat([b.rollout for b in parts], group_size=parts[0].rollout.group_size),
        rewards=torch.cat([b.rewards for b in parts]),
        advantages=torch.cat([b.advantages for b in parts]),
        group_sizes=[s for b in parts for s in b.group_sizes],
    )


def reward_metrics(batches: list[Batch]) -> dict[str, float]:
    """The reward metrics of a step's generations: ``reward_abstentions`` summed, every other key (a reward term's or
    a reward function's logged mean) averaged over the generations that have it (each of B completions)."""
    keys = dict.fromkeys(k for b in batches for k in b.reward_metrics)
    out = {}
    for key in keys:
        values = [b.reward_metrics[key] for b in batches if key in b.reward_metrics]
        out[key] = sum(values) if key == "reward_abstentions" else sum(values) / len(values)
    return out


@dataclass(frozen=True)
class Filled:
    """One step's dynamic sampling (module docstring).

    Attributes:
        batch: this rank's trained groups in sampling order, with the step's sampling and scoring seconds and reward
            metrics over every generation; None when no rank kept one (the step makes no update).
        summary: over every completion the step sampled on every rank: whether no group was informative, the mean
            reward and the truncated share (workers.engines.harness.Harness.generation).
        metrics: ``dynamic_sampling/batches`` (generations spent), ``dynamic_sampling/kept_groups`` (groups trained, all
            ranks), ``dynamic_sampling/informative_share`` (informative groups over groups sampled) and
            ``sampled_completions`` (all ranks).
    """

    batch: Batch | None
    summary: tuple[bool, float, float]
    metrics: dict[str, float]


def fill(sample: Callable[[int], Batch], cap: int, k: int = 1) -> Filled:
    """Sample generations ``sample(j)`` (j = 0, 1, ...: this rank's groups of the step's j-th generation of N prompts)
    and keep their informative groups until this rank holds its share (the first generation's groups) on every rank,
    or ``cap`` generations are spent; a short step keeps on every rank the fewest any rank holds, rounded down to a
    multiple of ``k`` (module docstring). Every rank makes the same collective calls (all_sum, all_gather)."""
    parts, sampled, need, kept, short = [], [], 0, 0, 1.0
    for j in range(cap):
        batch = sample(j)
        sampled.append(batch)
        need = need or len(batch.problems)
        take = informative_groups(batch.rewards).nonzero()[:, 0][: need - kept].tolist()
        if take:
            parts.append(select_groups(batch, take))
            kept += len(take)
        (short,) = all_sum([float(kept < need)])  # ranks still short of their share
        if not short:
            break
    trained = kept if not short else min(all_gather(kept)) // k * k
    counts = [
        (informative_groups(b.rewards).sum(), b.rewards.shape[0], b.rewards.numel(), b.rewards.sum(), b.rollout.truncated.sum())
        for b in sampled
    ]
    informative, groups, completions, reward, truncated = (sum(float(c[i]) for c in counts) for i in range(5))
    total, informative, groups, completions, reward, truncated = all_sum(
        [float(trained), informative, groups, completions, reward, truncated]
    )
    metrics = {
        "dynamic_sampling/batches": float(len(sampled)),
        "dynamic_sampling/kept_groups": total,
        "dynamic_sampling/informative_share": informative / groups,
        "sampled_completions": completions,
    }
    summary = (informative == 0, reward / completions, truncated / completions)
    if not total:
        return Filled(None, summary, metrics)
    assert trained, "a short step keeps the same number of groups on every rank"
    out = concat(parts)
    out = out if trained == kept else out.rows(slice(0, trained * out.rewards.shape[1]))
    seconds = {f"seconds_{s}": sum(getattr(b, f"seconds_{s}") for b in sampled) for s in ("generate", "score")}
    return Filled(replace(out, **seconds, reward_metrics=reward_metrics(sampled)), summary, metrics)

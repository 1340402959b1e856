"""A step's groups as trained: the rows of each group, the completions each realized (a trainer that dropped, merged or
repeated completions fails the trial naming them), and why groups without learning signal had none.

Pure functions on rows, prompts and rewards; both engines' steps use them (workers.engines).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Sequence
from itertools import accumulate

import torch

from workers.algos import STD_FLOOR


def group_windows(n_rows: int, sizes: Sequence[int]) -> list[slice]:
    """The rows of each group the advantage is computed over: the step's ``n_rows`` completion rows, in order, cut by
    the configured ``sizes`` (completions per group, one int per group). With fewer rows than ``sum(sizes)`` later
    windows are short (possibly empty); rows beyond the sum belong to the last group.

    Raises:
        ValueError: no group, or a size below 1.
    """
    if not sizes or min(sizes) < 1:
        raise ValueError(f"group sizes must be one int >= 1 per group, got {list(sizes)}")
    ends = list(accumulate(sizes))
    starts = [0, *ends[:-1]]
    ends[-1] = max(ends[-1], n_rows)  # extra rows: the last group's
    return [slice(min(a, n_rows), min(b, n_rows)) for a, b in zip(starts, ends, strict=True)]


def realized_group_sizes(prompts: Sequence[Hashable], sizes: Sequence[int]) -> list[int]:
    """The completions each group actually trains: in its window (group_windows), the rows of the window's most
    common prompt (0 for an empty window). A trainer that keeps every group as configured gives ``sizes`` back; a
    dropped completion, prompts merged into one group or a prompt's completions repeated show as other sizes.

    Args:
        prompts: (S,) one hashable per completion row naming its prompt (its token ids as a tuple, a dataset row).
        sizes: the configured completions per group (G each; one int per group).
    Returns:
        One int per group.
    Raises:
        ValueError: no group, or a size below 1.
    """
    windows = group_windows(len(prompts), sizes)
    return [max(Counter(prompts[w]).values(), default=0) for w in windows]


class GroupSizeError(Exception):
    """A step whose groups are not the configured ones (completions dropped, merged or repeated): the trial fails."""


def _span(sizes: Sequence[int]) -> str:
    lo, hi = min(sizes), max(sizes)
    return str(lo) if lo == hi else f"{lo} to {hi}"


def check_group_sizes(realized: Sequence[int], sizes: Sequence[int], step: int) -> None:
    """Nothing when each group's ``realized`` size (realized_group_sizes) is its configured one in ``sizes``.

    Raises:
        GroupSizeError: naming the realized sizes, the optimizer ``step`` (1-based) and the configured G.
    """
    if list(realized) != list(sizes):
        raise GroupSizeError(
            f"realized group size {_span(realized)} at step {step}, configured G = {_span(sizes)} "
            "(the trainer dropped or merged completions)"
        )


NO_SIGNAL_CAUSES = ("frac_groups_identical", "frac_groups_all_wrong", "frac_groups_all_right")


def no_signal_causes(rewards: Sequence[torch.Tensor | Sequence[float]], texts: Sequence[Sequence[str]]) -> dict[str, float]:
    """Shares of the groups without learning signal, by cause, each group counted under one cause at most.

    ``frac_groups_identical``: every completion text of the group is the same (checked first: whatever the rewards,
    sum_i A_i grad log pi(y) = 0 for advantages that sum to 0 in the group); among the others whose rewards are all
    equal (within STD_FLOOR), ``frac_groups_all_wrong``: the common reward <= 0, ``frac_groups_all_right``: >= 1 (the
    maximum of a 0/1 task). A constant group at another value counts in none (only in zero_variance_group_fraction),
    nor does a group without rows.

    Args:
        rewards: per group, its (G_i,) float rewards (groups may differ in size).
        texts: per group, its G_i completion texts.
    Returns:
        NO_SIGNAL_CAUSES -> share of the groups (0.0 each without any group).
    Raises:
        ValueError: rewards and texts do not hold the same number of groups.
    """
    if len(rewards) != len(texts):
        raise ValueError(f"{len(rewards)} groups of rewards but {len(texts)} of texts")
    counts = dict.fromkeys(NO_SIGNAL_CAUSES, 0)
    for r, t in zip(rewards, texts, strict=True):
        r = torch.as_tensor(r, dtype=torch.float64)
        if len(t) and len(set(t)) == 1:
            counts["frac_groups_identical"] += 1
        elif r.numel() and float(r.max() - r.min()) <= STD_FLOOR:
            common = float(r.mean())
            if common <= 0:
                counts["frac_groups_all_wrong"] += 1
            elif common >= 1:
                counts["frac_groups_all_right"] += 1
    return {k: v / max(len(texts), 1) for k, v in counts.items()}


def group_metrics(realized: Sequence[int], sizes: Sequence[int], rewards: Sequence[float], texts: Sequence[str]) -> dict:
    """A step's metrics of its groups, every engine's: the no-signal causes of each group's window (group_windows of
    the configured ``sizes``) of ``rewards`` and ``texts`` (S,), and the ``realized`` sizes' smallest and largest."""
    windows = group_windows(len(texts), sizes)
    causes = no_signal_causes([rewards[w] for w in windows], [texts[w] for w in windows])
    return {**causes, "realized_group_size_min": float(min(realized)), "realized_group_size_max": float(max(realized))}

"""Trial checkpoints: model, optimizer, RNG states, step and running counters, written atomically (torch is imported
only to read or write one: the controller asks has_checkpoint).

A trial restarted from its checkpoint ends with the same metrics as one that never stopped
(the RNG states make the remaining samples identical on the CPU).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

FILE = "checkpoint.pt"


def save_checkpoint(folder: str | Path, state: dict[str, Any]) -> None:
    """Write state to folder/checkpoint.pt via a temporary file and an atomic rename."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / (FILE + ".tmp")
    import torch

    torch.save(state, tmp)
    os.replace(tmp, folder / FILE)


def load_checkpoint(folder: str | Path | None) -> dict[str, Any] | None:
    """The last checkpoint in folder, or None when there is none."""
    if folder is None or not (Path(folder) / FILE).is_file():
        return None
    import torch

    return torch.load(Path(folder) / FILE, weights_only=False)


def has_checkpoint(folder: str | Path | None) -> bool:
    """Whether a trial left a checkpoint in folder: groupscale's checkpoint.pt, or TRL's checkpoint-<step> folders."""
    return folder is not None and ((Path(folder) / FILE).is_file() or any(Path(folder).glob("checkpoint-*/")))

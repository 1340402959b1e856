"""Trial checkpoints: model, optimizer, RNG states, step and running counters, written atomically (torch is imported
only to read or write one: the controller asks has_checkpoint).

A trial restarted from its checkpoint ends with the same metrics as one that never stopped
(the RNG states make the remaining samples identical on the CPU). The folder is a storage location
(sweeps.storage: a local folder, or a URI such as s3://bucket/prefix/checkpoints/<trial> that every node reaches).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from sweeps import storage

FILE = "checkpoint.pt"


def save_checkpoint(folder: str | Path, state: dict[str, Any]) -> None:
    """Write state to folder/checkpoint.pt whole: via a temporary file and an atomic rename, or on a remote location
    a local temporary file uploaded in one PUT."""
    import torch

    if not storage.is_remote(folder):
        Path(folder).mkdir(parents=True, exist_ok=True)
        tmp = Path(folder) / (FILE + ".tmp")
        torch.save(state, tmp)
        os.replace(tmp, Path(folder) / FILE)
        return
    with tempfile.TemporaryDirectory() as local:
        torch.save(state, Path(local) / FILE)
        storage.upload_file(Path(local) / FILE, storage.join(folder, FILE))


def load_checkpoint(folder: str | Path | None) -> dict[str, Any] | None:
    """The last checkpoint in folder, or None when there is none."""
    if folder is None:
        return None
    import torch

    try:
        if not storage.is_remote(folder):
            return torch.load(Path(folder) / FILE, weights_only=False)
        with tempfile.TemporaryDirectory() as local:  # one GET: no separate look for the object first
            storage.download_file(storage.join(folder, FILE), Path(local) / FILE)
            return torch.load(Path(local) / FILE, weights_only=False)
    except FileNotFoundError:
        return None


def has_checkpoint(folder: str | Path | None) -> bool:
    """Whether a trial left a checkpoint in folder: groupscale's checkpoint.pt, or TRL's checkpoint-<step> folders."""
    if folder is None:
        return False
    return storage.exists(storage.join(folder, FILE)) or any(
        rel.startswith("checkpoint-") and "/" in rel for rel in storage.listing(folder)
    )

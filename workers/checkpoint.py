"""Trial checkpoints: model, optimizer, RNG states, step and running counters, written atomically (torch is imported
only to read or write one: the controller asks has_checkpoint); and a checkpoint of several files as one unit.

A trial restarted from its checkpoint ends with the same metrics as one that never stopped
(the RNG states make the remaining samples identical on the CPU). The folder is a storage location
(sweeps.storage: a local folder, or a URI such as s3://bucket/prefix/checkpoints/<trial> that every node reaches).
groupscale's checkpoint is one file (``checkpoint.pt``), written in one PUT or rename. A checkpoint of several files
(TRL's checkpoint-N folders, workers.engines.trl_checkpoints) is a unit by its manifest: the SHA-256 of each of its
files, written after all of them (``write_manifest``); a folder is complete when its manifest is there and every file
it names has its checksum (``fetch``), so a kill while uploading, or another attempt's files of the same names, are
never taken for a checkpoint.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from sweeps import storage

FILE = "checkpoint.pt"
MANIFEST = "manifest.json"  # {"step": N, "files": {relative path: SHA-256 hex}}


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
        data = storage.read_bytes(storage.join(folder, FILE))  # one GET of the whole object: one version of it (a
        # ranged download read during a PUT of the next checkpoint gave a file of two versions, a torn checkpoint)
        return None if data is None else torch.load(io.BytesIO(data), weights_only=False)
    except FileNotFoundError:
        return None


def has_checkpoint(folder: str | Path | None) -> bool:
    """Whether a trial left a checkpoint in folder: groupscale's checkpoint.pt, or TRL's checkpoint-<step> folders."""
    if folder is None:
        return False
    return storage.exists(storage.join(folder, FILE)) or any(
        rel.startswith("checkpoint-") and rel.endswith("/" + MANIFEST) for rel in storage.listing(folder)
    )


def sha256(path: str | Path) -> str:
    """The SHA-256 of the file's bytes, hex (hashlib.file_digest reads it in blocks: a checkpoint need not fit in memory)."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def checksums(folder: Path, files: list[str]) -> dict[str, str]:
    """Each of ``files`` (paths relative to ``folder``) -> its SHA-256."""
    return {name: sha256(folder / name) for name in files}


def publish(folder: Path, location: str, files: list[str]) -> dict[str, str]:
    """Upload each of ``files`` (relative to the local ``folder``) to the same path under ``location``, every one
    (one of the same name and size there may be another attempt's); their checksums, taken before the upload."""
    sums = checksums(folder, files)
    for name in files:
        storage.upload_file(folder / name, storage.join(location, name))
    return sums


def write_manifest(location: str | Path, files: dict[str, str], step: int) -> None:
    """Mark the checkpoint at ``location`` complete: its manifest (MANIFEST), written whole, after every file."""
    storage.write_text(storage.join(location, MANIFEST), json.dumps({"step": step, "files": files}, sort_keys=True))


def fetch(location: str | Path, local: Path | None) -> bool:
    """Whether the checkpoint at ``location`` is whole: its manifest is there and each file it names has its checksum.
    With ``local``, the files are downloaded into that folder first (emptied) and checked there; without, checked in
    place (a local location)."""
    try:
        manifest = json.loads(storage.read_text(storage.join(location, MANIFEST)) or "null")
        files = dict(manifest["files"])
    except (ValueError, TypeError, KeyError):  # none, or not one this version wrote
        return False
    here = Path(str(location)) if local is None else local
    try:
        if local is not None:
            shutil.rmtree(local, ignore_errors=True)
            for name in files:
                (local / name).parent.mkdir(parents=True, exist_ok=True)
                storage.download_file(storage.join(location, name), local / name)
        return all(sha256(here / name) == digest for name, digest in files.items())
    except OSError:  # a file the manifest names is missing (pyarrow's FileNotFoundError) or unreadable
        return False

"""TRL's checkpoint-N folders as units that every rank of a trial agrees on: sealed once each rank's files are written
(and uploaded), and the one checkpoint every rank resumes from.

TRL's Trainer writes a checkpoint-N folder on every rank: rank 0 the weights, optimizer, scheduler and trainer_state.json,
each rank r its RNG state (``rng_state_<r>.pth``, ``rng_state.pth`` on one process). ``seal`` (every rank, after TRL's
save) makes it a unit (workers.checkpoint's manifest, as Ray Train's storage persists a checkpoint and then registers
it): each rank uploads the files it wrote (on a remote location), the ranks exchange their files' checksums, rank 0
writes the manifest last and then drops the older checkpoints. ``agree`` (every rank, before training) picks the resume:
rank 0 lists the sealed checkpoints, newest first; each rank fetches one and checks it against its manifest; the first
that every rank holds whole is taken by all, else the trial starts afresh. A folder without a manifest, or whose files
differ from it (a kill while sealing, another attempt's files), is never resumed from and is deleted.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from sweeps import storage
from sweeps.trial import TrialConfig
from workers import checkpoint
from workers.distributed import all_gather
from workers.engines.base import Placement

PREFIX = "checkpoint-"


def output_dir(cfg: TrialConfig, placement: Placement) -> Path:
    """Where TRL writes its checkpoint-N folders: the trial's checkpoint folder, or, when that is a remote storage
    location (GROUPSCALE_STORAGE_URI s3://...), a local folder under the cache that ``seal`` uploads from (rank r > 0
    has one of its own: ranks may share a node)."""
    if not cfg.checkpoint_dir:
        return Path(cfg.cache_dir) / "trl-unsaved"
    if storage.is_remote(cfg.checkpoint_dir):
        local = storage.scratch(cfg.checkpoint_dir, Path(cfg.cache_dir))
        return local.with_name(f"{local.name}.rank{placement.rank}") if placement.rank else local
    return Path(cfg.checkpoint_dir)


def own_files(folder: Path, placement: Placement) -> list[str]:
    """The files of TRL's checkpoint ``folder`` that this rank wrote: rank r > 0 its RNG state, rank 0 every other.

    Raises:
        FileNotFoundError: rank r > 0 finds no RNG state of its own (TRL saved none: a resume would sample apart).
    """
    if placement.rank:
        name = f"rng_state_{placement.rank}.pth"
        if not (folder / name).is_file():
            raise FileNotFoundError(f"rank {placement.rank} wrote no {name} in {folder}")
        return [name]
    others = {f"rng_state_{r}.pth" for r in range(1, placement.world_size)}
    files = (str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
    return sorted(f for f in files if f not in others and f != checkpoint.MANIFEST and not f.endswith(".tmp"))


def _steps(names: Any) -> list[int]:
    """The steps of the ``checkpoint-N`` names among ``names``, newest first."""
    steps = (n.removeprefix(PREFIX) for n in names if n.startswith(PREFIX))
    return sorted((int(s) for s in steps if s.isdigit()), reverse=True)


def _folders(location: str | Path) -> list[int]:
    """The steps of every checkpoint-N folder at ``location`` (sealed or not), newest first."""
    return _steps({rel.split("/", 1)[0] for rel in storage.listing(location) if "/" in rel})


def sealed_steps(location: str | Path) -> list[int]:
    """The steps of the checkpoint-N folders at ``location`` that hold a manifest, newest first (their files are
    checked only when fetched)."""
    return _steps({rel.split("/", 1)[0] for rel in storage.listing(location) if rel.endswith("/" + checkpoint.MANIFEST)})


def _drop(location: str | Path, steps: list[int]) -> None:
    """Delete the checkpoint-N folders of ``steps`` at ``location``."""
    for step in steps:
        storage.delete(storage.join(location, f"{PREFIX}{step}"))


def seal(cfg: TrialConfig, placement: Placement, local: Path, step: int) -> None:
    """Make TRL's checkpoint of ``step`` one unit (module docstring); called by every rank after TRL's save, in step.

    local: this rank's TRL output_dir. On a remote checkpoint folder each rank uploads its own files (own_files),
    every one of them: a file of the same name there may be another attempt's. Rank 0 then writes the manifest with
    every rank's checksums, and drops the older checkpoints there; each rank drops its older local copies.
    """
    root, folder = str(cfg.checkpoint_dir), local / f"{PREFIX}{step}"
    location, remote = storage.join(root, f"{PREFIX}{step}"), storage.is_remote(root)
    files = own_files(folder, placement)
    sums = checkpoint.publish(folder, location, files) if remote else checkpoint.checksums(folder, files)
    every = {name: digest for share in all_gather(sums) for name, digest in share.items()}
    if placement.is_main:
        checkpoint.write_manifest(location, every, step)
        _drop(root, [s for s in _folders(root) if s < step])
    if remote:
        _drop(local, [s for s in _folders(local) if s < step])


def agree(cfg: TrialConfig, placement: Placement, local: Path) -> str | None:
    """The checkpoint every rank resumes from: its folder in ``local`` (this rank's TRL output_dir), or None to start
    afresh (module docstring); called by every rank before training. Folders newer than the one taken (unsealed, or
    not whole) are deleted, here and at the checkpoint location. On a remote location the local folder is emptied
    first: a copy left there by an earlier attempt on this node is not what the store holds."""
    location = str(cfg.checkpoint_dir)
    remote = storage.is_remote(location)
    if remote:
        shutil.rmtree(local, ignore_errors=True)
    candidates = all_gather(sealed_steps(location) if placement.is_main else None)[0]  # rank 0 decides the order
    taken = None
    for step in candidates:
        folder = local / f"{PREFIX}{step}"
        whole = checkpoint.fetch(storage.join(location, f"{PREFIX}{step}"), folder if remote else None)
        if all(all_gather(whole)):
            taken = step
            break
    all_gather(None)  # every rank has read what it needs before rank 0 deletes
    if placement.is_main:
        _drop(location, [s for s in _folders(location) if taken is None or s > taken])
    return None if taken is None else str(local / f"{PREFIX}{taken}")


STATE = "TrialState"  # each checkpoint's trainer_state.json holds the harness's TrialState under this callback's name


def saved_state(folder: str) -> dict[str, Any] | None:
    """The harness's TrialState in TRL's checkpoint ``folder`` (None: one TRL saved without it)."""
    saved = json.loads((Path(folder) / "trainer_state.json").read_text()).get("stateful_callbacks", {})
    return saved.get(STATE, {}).get("attributes")

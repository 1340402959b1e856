"""TRL's checkpoint folders as units (workers.engines.trl_checkpoints, workers.checkpoint's manifest): sealed after
every file, uploaded whole over another attempt's files, and resumed from only when every file matches, on a local
folder and on an S3 API server."""

from pathlib import Path

import pytest

from sweeps import storage
from sweeps.trial import TrialConfig
from workers import checkpoint
from workers.engines.base import Placement
from workers.engines.trl_checkpoints import agree, own_files, seal, sealed_steps

ALONE, RANK0, RANK1 = Placement(), Placement(0, 2), Placement(1, 2)
FILES = ("model.safetensors", "optimizer.pt", "scheduler.pt", "trainer_state.json")


@pytest.fixture(params=["local", "s3"])
def root(request, tmp_path):
    return request.getfixturevalue("s3_bucket") + "/checkpoints/t1" if request.param == "s3" else str(tmp_path / "store")


def _cfg(root: str, cache: Path) -> TrialConfig:
    return TrialConfig.flat(
        task={"name": "bandit"},
        model={"preset": "tiny-llama"},
        group_size=2,
        samples_per_step=8,
        seed=0,
        steps=8,
        checkpoint_dir=root,
        checkpoint_every=2,
        cache_dir=str(cache),
    )


def _write(local: Path, step: int, attempt: str, names=(*FILES, "rng_state.pth")) -> None:
    """TRL's checkpoint-<step> as one attempt wrote it: every file 64 bytes, the attempt's letter in each."""
    folder = local / f"checkpoint-{step}"
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        (folder / name).write_bytes(f"{attempt} {name} {step}".ljust(64).encode())


def _local(cfg: TrialConfig) -> Path:
    from workers.engines.trl_checkpoints import output_dir

    return output_dir(cfg, ALONE)


def test_a_checkpoint_uploaded_over_another_attempts_half_holds_only_the_new_attempts_files(root, tmp_path):
    """Attempt A was killed while its checkpoint-4 uploaded (two files there, no manifest); attempt B, on another
    node, writes checkpoint-4 with files of the same names and sizes: the store then holds B's bytes in every file (a
    mirror that skipped a file of the same size kept A's weights beside B's optimizer), and A's half is never a resume."""
    cfg = _cfg(root, tmp_path / "a")
    _write(_local(cfg), 4, "A")
    for name in FILES[:2]:  # A's upload, cut short
        storage.write_bytes(storage.join(root, "checkpoint-4", name), (_local(cfg) / "checkpoint-4" / name).read_bytes())
    assert sealed_steps(root) == [] and agree(cfg, ALONE, _local(cfg)) is None  # never resumed from
    b = _cfg(root, tmp_path / "b")
    _write(_local(b), 4, "B")
    seal(b, ALONE, _local(b), 4)
    assert sealed_steps(root) == [4]
    for name in (*FILES, "rng_state.pth"):
        assert storage.read_bytes(storage.join(root, "checkpoint-4", name)).startswith(b"B "), name
    resumed = agree(b, ALONE, _local(_cfg(root, tmp_path / "c")))
    assert resumed is not None and Path(resumed, "model.safetensors").read_bytes().startswith(b"B ")


def test_a_resume_takes_the_newest_checkpoint_whose_files_match_its_manifest_and_deletes_the_newer_ones(root, tmp_path):
    cfg = _cfg(root, tmp_path / "a")
    local = _local(cfg)
    for step in (2, 4, 6):
        _write(local, step, "A")
        seal(cfg, ALONE, local, step)
        assert sealed_steps(root) == [step]  # the older one is dropped once the newer is sealed
    _write(local, 8, "A")  # killed before its seal
    storage.write_bytes(storage.join(root, "checkpoint-8", "model.safetensors"), b"half")
    assert sealed_steps(root) == [6]
    storage.write_bytes(storage.join(root, "checkpoint-6", "optimizer.pt"), b"another attempt's".ljust(64))  # no match
    assert agree(cfg, ALONE, _local(_cfg(root, tmp_path / "b"))) is None  # 6 does not match, and nothing older is kept
    assert storage.listing(root) == {}  # what did not match is gone: the trial starts afresh


def test_a_checkpoint_is_sealed_after_every_ranks_files_and_each_rank_finds_its_own(tmp_path):
    """On 2 processes rank 1 writes only its RNG state; the manifest names both ranks' files (one process here plays
    both: all_gather is the identity, so rank 0's seal sees rank 0's files alone and the test checks own_files)."""
    folder = tmp_path / "checkpoint-2"
    _write(tmp_path, 2, "A", names=(*FILES, "rng_state_0.pth", "rng_state_1.pth"))
    assert own_files(folder, RANK1) == ["rng_state_1.pth"]
    assert own_files(folder, RANK0) == sorted((*FILES, "rng_state_0.pth"))
    (folder / "rng_state_1.pth").unlink()
    with pytest.raises(FileNotFoundError, match="rank 1 wrote no rng_state_1.pth"):
        own_files(folder, RANK1)


def test_a_manifest_is_written_last_and_checked_file_by_file(root, tmp_path):
    folder = tmp_path / "ckpt"
    folder.mkdir()
    (folder / "a.bin").write_bytes(b"a" * 10)
    where = storage.join(root, "checkpoint-1")
    sums = checkpoint.publish(folder, where, ["a.bin"]) if storage.is_remote(root) else checkpoint.checksums(folder, ["a.bin"])
    if not storage.is_remote(root):
        storage.write_bytes(storage.join(where, "a.bin"), b"a" * 10)
    here = None if not storage.is_remote(root) else tmp_path / "got"
    assert not checkpoint.fetch(where, here)  # no manifest yet: not a checkpoint
    checkpoint.write_manifest(where, sums, 1)
    assert checkpoint.fetch(where, here)
    storage.write_bytes(storage.join(where, "a.bin"), b"b" * 10)  # same size, other bytes
    assert not checkpoint.fetch(where, here)

"""Storage every node reaches (sweeps.storage): locations, whole writes, and the mirror of TRL's checkpoint folders,
on a local folder and on an S3 API server."""

import pytest

from sweeps import storage
from workers.checkpoint import has_checkpoint, load_checkpoint, save_checkpoint


def test_a_location_is_a_folder_or_a_uri_whose_query_stays_at_the_end():
    assert storage.join("s3://b/p?endpoint_override=h:9000&scheme=http", "checkpoints", "t1") == (
        "s3://b/p/checkpoints/t1?endpoint_override=h:9000&scheme=http"
    )
    assert storage.join("/data/", "workers") == "/data/workers"
    assert storage.is_remote("s3://b") and storage.is_remote("gs://b/p") and not storage.is_remote("/data")
    assert not storage.is_remote("file:///data") and not storage.is_remote("relative/dir")


@pytest.fixture(params=["local", "s3"])
def root(request, tmp_path):
    return request.getfixturevalue("s3_bucket") + "/prefix" if request.param == "s3" else str(tmp_path / "store")


def test_objects_are_written_whole_read_listed_and_deleted(root):
    where = storage.join(root, "workers", "w1.json")
    assert storage.read_text(where) is None and not storage.exists(where)
    storage.write_text(where, '{"trial": "t1"}')
    storage.write_text(where, '{"trial": "t2"}')
    assert storage.read_text(where) == '{"trial": "t2"}'
    assert storage.listing(storage.join(root, "workers")) == {"w1.json": 15}
    storage.delete(storage.join(root, "workers"))
    assert storage.listing(storage.join(root, "workers")) == {} and storage.read_text(where) is None


def test_a_checkpoint_round_trips_and_says_it_is_there(root):
    folder = storage.join(root, "checkpoints", "t1")
    assert not has_checkpoint(folder) and load_checkpoint(folder) is None
    save_checkpoint(folder, {"step": 4, "values": [1.0, 2.0]})
    assert has_checkpoint(folder) and load_checkpoint(folder) == {"step": 4, "values": [1.0, 2.0]}
    assert set(storage.listing(folder)) == {"checkpoint.pt"}  # no temporary file left behind


def test_the_mirror_uploads_what_trl_wrote_marker_last_and_drops_what_it_rotated_out(root, tmp_path, monkeypatch):
    local = tmp_path / "out"
    for step in (2, 4):
        for name in ("trainer_state.json", "model.safetensors", "optimizer.pt"):
            (local / f"checkpoint-{step}").mkdir(parents=True, exist_ok=True)
            (local / f"checkpoint-{step}" / name).write_text(f"{name} at {step}")
    (local / "checkpoint-4" / "optimizer.pt.tmp").write_text("being written")
    storage.write_text(storage.join(root, "starts"), "2")  # beside them: not TRL's, left alone
    uploaded: list[str] = []
    upload = storage.upload_file
    monkeypatch.setattr(storage, "upload_file", lambda src, dst: (uploaded.append(str(src)), upload(src, dst)))
    storage.mirror(local, root, last="trainer_state.json", only="checkpoint-")
    assert [u.endswith("trainer_state.json") for u in uploaded] == [False] * 4 + [True] * 2  # each folder's marker last
    (local / "checkpoint-2" / "trainer_state.json").unlink()  # TRL rotates the older one out
    for name in ("model.safetensors", "optimizer.pt"):
        (local / "checkpoint-2" / name).unlink()
    uploaded.clear()
    storage.mirror(local, root, last="trainer_state.json", only="checkpoint-")
    assert uploaded == []  # nothing new
    assert sorted(storage.listing(root)) == [
        "checkpoint-4/model.safetensors",
        "checkpoint-4/optimizer.pt",
        "checkpoint-4/trainer_state.json",
        "starts",
    ]
    fresh = tmp_path / "elsewhere"
    storage.download(root, fresh)
    assert (fresh / "checkpoint-4" / "optimizer.pt").read_text() == "optimizer.pt at 4"

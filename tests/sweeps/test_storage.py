"""Storage every node reaches (sweeps.storage): locations, whole writes and groupscale's one-file checkpoint, on a local
folder and on an S3 API server."""

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

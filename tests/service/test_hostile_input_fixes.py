"""Defects found by tests/e2e/test_hostile_input.py, pinned at the HTTP layer (no Ray, SQLite store)."""

import json

import pytest
from fastapi.testclient import TestClient

from service.main import create_app
from service.settings import Settings
from tests.factories import spec

SPEC = spec(name="s", samples_per_step=[8])


@pytest.fixture
def http(tmp_path):
    with TestClient(create_app(Settings(data_dir=tmp_path), run_scheduler=False)) as c:
        yield c


@pytest.mark.parametrize(
    "content",
    [
        "root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1::/usr/sbin:/usr/sbin/nologin\n",  # /etc/passwd, say
        '{"prompt": "1+1=", "answer": "2"}\n',  # one problem: nothing left to evaluate on
        '{"question": "1+1=", "answer": "2"}\n{"question": "2+2=", "answer": "4"}\n',
    ],
    ids=["not-json", "one-line", "no-prompt"],
)
def test_a_jsonl_task_file_the_worker_cannot_read_is_422_without_echoing_it(http, tmp_path, content):
    path = tmp_path / "data.jsonl"
    path.write_text(content)
    r = http.post("/v1/sweeps", json={**SPEC, "task": {"name": "jsonl", "path": str(path)}})
    assert r.status_code == 422, r.text
    [error] = r.json()["detail"]
    assert error["loc"] == ["body", "task", "path"]
    assert "not a usable jsonl task file" in error["msg"] and '{"prompt": str' in error["msg"]
    assert "root:x" not in error["msg"] and "1+1" not in error["msg"]
    assert http.get("/v1/sweeps").json() == []


def test_binary_jsonl_task_file_is_422(http, tmp_path):
    path = tmp_path / "data.jsonl"
    path.write_bytes(b"\xff\xfe\x00garbage")
    r = http.post("/v1/sweeps", json={**SPEC, "task": {"name": "jsonl", "path": str(path)}})
    assert r.status_code == 422 and "not UTF-8" in r.json()["detail"][0]["msg"]


def test_a_readable_jsonl_task_file_is_accepted(http, tmp_path):
    path = tmp_path / "data.jsonl"
    path.write_text("".join(json.dumps({"prompt": f"{i}+1=", "answer": i + 1}) + "\n" for i in range(4)))
    r = http.post("/v1/sweeps", json={**SPEC, "task": {"name": "jsonl", "path": str(path)}})
    assert r.status_code == 201, r.text


def test_a_streamed_oversized_body_is_413_not_400(http):
    """Chunked, with no Content-Length: the limit trips while FastAPI reads the body, which used to turn
    the middleware's exception into 400 "There was an error parsing the body"."""
    chunks = (b" " * 65536 for _ in range(32))  # 2 MiB against the 1 MiB default
    r = http.post("/v1/sweeps", content=chunks, headers={"content-type": "application/json"})
    assert r.status_code == 413, r.text
    assert r.json() == {"detail": f"request body too large: at most {1 << 20} bytes"}


def test_a_stored_row_that_cannot_be_rendered_does_not_take_the_list_down(http, tmp_path):
    """A row stored before free-form values were checked (a lone surrogate in chat_template_kwargs): the list
    answers 200 and says which row is unreadable and how to remove it; the other rows are whole."""
    from service.store import Store, Sweep

    good = http.post("/v1/sweeps", json=SPEC).json()
    store = Store(f"sqlite:///{tmp_path / 'groupscale.db'}")
    with store.session() as s:
        bad_spec = {**good["spec"], "model": {**good["spec"]["model"], "chat_template_kwargs": {"x": "\ud800"}}}
        s.add(Sweep(name="old", spec=bad_spec, task_name="arithmetic", model_name="tiny-llama", status="queued"))
    store.engine.dispose()
    r = http.get("/v1/sweeps")
    assert r.status_code == 200, r.text
    rows = {row["name"]: row for row in r.json()}
    assert rows["s"]["spec"] == good["spec"] and rows["s"]["error"] is None
    assert rows["old"]["spec"] == {} and "cannot be read" in rows["old"]["error"], rows["old"]
    assert f"groupscale delete {rows['old']['id']}" in rows["old"]["error"]
    assert http.get(f"/v1/sweeps/{rows['old']['id']}").json() == rows["old"]
    assert http.delete(f"/v1/sweeps/{rows['old']['id']}").json()["status"] == "cancelled"
    with store.session() as s:  # what the scheduler does once the sweep's runs are closed
        s.get(Sweep, rows["old"]["id"]).mlflow_closed = True
    store.engine.dispose()
    assert http.delete(f"/v1/sweeps/{rows['old']['id']}", params={"purge": "true"}).status_code == 200
    assert [row["name"] for row in http.get("/v1/sweeps").json()] == ["s"]

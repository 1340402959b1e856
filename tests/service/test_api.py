from unittest.mock import ANY

import pytest

from tests.openapi import read_urls
from tests.service.conftest import SPEC


def test_submit_persists_before_answering_and_lists(client, make_client):
    r = client.post("/v1/sweeps", json=SPEC)
    assert r.status_code == 201
    body = r.json()
    assert body["status"] == "queued" and body["progress"]["total"] == 8
    assert set(body["mlflow"]) == {"tracking_uri", "experiment_id", "parent_run_id", "url"}
    assert client.get(f"/v1/sweeps/{body['id']}").json()["spec"]["group_sizes"] == [2, 4, 8, 16]
    # A new app over the same store (a restarted controller) still has it.
    with make_client() as again:
        assert [s["id"] for s in again.get("/v1/sweeps").json()] == [body["id"]]


def test_group_size_not_dividing_budget_is_422_with_field_and_valid_sizes(client):
    r = client.post("/v1/sweeps", json={**SPEC, "group_sizes": [3], "samples_per_step": [64]})
    assert r.status_code == 422
    (err,) = r.json()["detail"]
    assert err["loc"] == ["body", "group_sizes"]
    assert "2, 4, 8, 16, 32, 64" in err["msg"]
    assert client.get("/v1/sweeps").json() == []  # nothing accepted, nothing scheduled


def test_a_trl_name_given_with_its_alias_is_422(client):
    body = {**SPEC, "grpo": {"epsilon": 0.3, "clip_eps": 0.2}}
    r = client.post("/v1/sweeps", json=body)
    assert r.status_code == 422
    (err,) = r.json()["detail"]
    assert err["loc"][-1] == "grpo" and "give epsilon (TRL's name) or clip_eps, not both" in err["msg"]
    ok = client.post("/v1/sweeps", json={**SPEC, "grpo": {"epsilon": 0.3, "loss_type": "dr_grpo"}})
    assert ok.status_code == 201
    shown = client.get(f"/v1/sweeps/{ok.json()['id']}").json()["spec"]["grpo"]
    assert shown["clip_eps"] == 0.3 and shown["loss_aggregation"] == "seq_mean_token_sum_norm" and "epsilon" not in shown


def test_an_unknown_field_is_422_with_a_suggestion(client):
    r = client.post("/v1/sweeps", json={**SPEC, "grpo": {"temprature": 1.0}})
    assert r.status_code == 422
    (err,) = r.json()["detail"]
    assert err["loc"] == ["body", "grpo", "temprature"] and "did you mean temperature?" in err["msg"]


def test_trial_limit_is_a_422_naming_the_setting(make_client):
    with make_client(max_trials=4) as c:
        r = c.post("/v1/sweeps", json=SPEC)
    assert r.status_code == 422 and "GROUPSCALE_MAX_TRIALS" in r.json()["detail"][0]["msg"]


def test_step_limit_is_a_422_at_steps_naming_the_setting(make_client):
    with make_client(max_steps=4) as c:
        r = c.post("/v1/sweeps", json=SPEC)  # steps 5
        ok = c.post("/v1/sweeps", json={**SPEC, "steps": 4})
    (err,) = r.json()["detail"]
    assert r.status_code == 422 and err["loc"] == ["body", "steps"] and "GROUPSCALE_MAX_STEPS" in err["msg"]
    assert ok.status_code == 201


def test_model_path_outside_root_is_refused(make_client, tmp_path):
    with make_client(model_root=tmp_path / "models") as c:
        r = c.post("/v1/sweeps", json={**SPEC, "model": {"path": "/etc"}})
    assert r.status_code == 422
    assert r.json()["detail"][0]["loc"] == ["body", "model", "path"]


def test_a_token_closes_every_endpoint_but_health(make_client):
    auth = {"Authorization": "Bearer s3cret"}
    with make_client(api_token="s3cret") as c:
        assert c.post("/v1/sweeps", json=SPEC).status_code == 401
        ok = c.post("/v1/sweeps", json=SPEC, headers=auth)
        probe = c.post("/v1/probes", json=SPEC, headers=auth)
        answer = c.post("/v1/answers", json={**SPEC, "answer": {"budget": 5000}}, headers=auth)
        assert (ok.status_code, probe.status_code, answer.status_code) == (201, 201, 201)
        paths = read_urls(c, ok.json()["id"], probe.json()["id"], answer.json()["id"], "task=arithmetic&model=tiny-llama")
        assert len(paths) == 7  # sweeps, a sweep, its trials, its fit, a probe, an answer, recommendations
        for path in paths:
            closed = c.get(path)
            assert closed.status_code == 401 and closed.headers["WWW-Authenticate"] == "Bearer", path
            assert "spec" not in closed.text and "tiny-llama" not in closed.text
            assert c.get(path, headers={"Authorization": "Bearer wrong"}).status_code == 401, path
            assert c.get(path, headers={"Authorization": "Basic s3cret"}).status_code == 401, path
            assert c.get(path, headers=auth).status_code in (200, 404), path  # 404: no finished sweep to recommend from
        assert c.get(paths[0], headers=auth).json()[0]["id"] == ok.json()["id"]
        assert c.delete(f"/v1/sweeps/{ok.json()['id']}").status_code == 401
        health = c.get("/v1/health")  # open, up/down only
        assert health.json()["mlflow"] == {"ok": False, "detail": ""} and health.json()["workers"] == {}
        schemes = c.get("/openapi.json").json()["components"]["securitySchemes"]
        assert schemes == {"HTTPBearer": {"type": "http", "scheme": "bearer", "description": ANY}}  # /docs can authorize


def test_public_reads_open_the_reads_and_keep_writes_closed(make_client):
    auth = {"Authorization": "Bearer s3cret"}
    with make_client(api_token="s3cret", public_reads=True) as c:
        assert c.post("/v1/sweeps", json=SPEC).status_code == 401
        sid = c.post("/v1/sweeps", json=SPEC, headers=auth).json()["id"]
        pid = c.post("/v1/probes", json=SPEC, headers=auth).json()["id"]
        aid = c.post("/v1/answers", json={**SPEC, "answer": {"budget": 5000}}, headers=auth).json()["id"]
        for path in read_urls(c, sid, pid, aid, "task=arithmetic&model=tiny-llama"):
            assert c.get(path).status_code in (200, 404), path
        assert c.get(f"/v1/sweeps/{sid}").json()["spec"]["group_sizes"] == [2, 4, 8, 16]
        assert c.delete(f"/v1/sweeps/{sid}").status_code == 401
        assert c.post(f"/v1/sweeps/{sid}/extend", json={"group_sizes": [32]}).status_code == 401


def test_idempotency_key_returns_the_same_sweep(client):
    a = client.post("/v1/sweeps", json=SPEC, headers={"Idempotency-Key": "k1"})
    b = client.post("/v1/sweeps", json=SPEC, headers={"Idempotency-Key": "k1"})
    assert (a.status_code, b.status_code) == (201, 200) and a.json()["id"] == b.json()["id"]
    assert len(client.get("/v1/sweeps").json()) == 1


def test_cancel_a_queued_sweep(client):
    sid = client.post("/v1/sweeps", json=SPEC).json()["id"]
    assert client.delete(f"/v1/sweeps/{sid}").json()["status"] == "cancelled"
    assert client.get("/v1/sweeps/nope").status_code == 404


def test_provisional_fit_and_recommendation_without_results(client):
    sid = client.post("/v1/sweeps", json=SPEC).json()["id"]
    fit = client.get(f"/v1/sweeps/{sid}/fit").json()
    assert fit["status"] == "insufficient_data" and fit["message"].startswith("provisional")
    r = client.get("/v1/recommendations", params={"task": "arithmetic", "model": "tiny-llama"})
    assert r.status_code == 404 and "no finished sweep" in r.json()["detail"]


def test_health_reports_missing_components(client):
    r = client.get("/v1/health")
    assert r.status_code == 503
    assert r.json()["store"]["ok"] is True and r.json()["ray"]["ok"] is False


def test_probe_is_queued_and_readable(client):
    bandit = {**SPEC, "task": {"name": "bandit"}, "model": {"preset": "tabular"}, "probe": {"prompts": 8, "completions": 4}}
    r = client.post("/v1/probes", json=bandit)
    assert r.status_code == 201 and r.json()["status"] == "queued"
    assert client.get(f"/v1/probes/{r.json()['id']}").json()["spec"]["probe"]["completions"] == 4
    assert client.get("/v1/probes/nope").status_code == 404
    bad = client.post("/v1/probes", json={**bandit, "probe": {"completions": 3}})
    assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == ["body", "probe", "completions"]


def test_task_and_model_must_fit(client):
    r = client.post("/v1/sweeps", json={**SPEC, "task": {"name": "bandit"}})
    assert r.status_code == 422
    assert r.json()["detail"][0]["loc"] == ["body", "model"] and "tabular" in r.json()["detail"][0]["msg"]


def test_nan_and_infinity_are_422_not_500(client):
    for body in ('{"name": "x", "grpo": {"temperature": NaN}}', '{"name": "x", "grpo": {"lr": Infinity}}'):
        r = client.post("/v1/sweeps", content=body, headers={"content-type": "application/json"})
        assert r.status_code == 422, r.text
        assert all("input" not in e for e in r.json()["detail"])  # the input is not echoed back


def test_no_type_coercion(client):
    for bad in ({"steps": True}, {"steps": "20"}, {"group_sizes": ["2", "4"]}):
        r = client.post("/v1/sweeps", json={**SPEC, **bad})
        assert r.status_code == 422, bad


def test_oversized_body_is_413(client):
    r = client.post("/v1/sweeps", content=b"{" + b" " * (2 << 20) + b"}", headers={"content-type": "application/json"})
    assert r.status_code == 413 and "too large" in r.json()["detail"]


def test_idempotency_key_reused_for_another_spec_is_409(client):
    assert client.post("/v1/sweeps", json=SPEC, headers={"Idempotency-Key": "k"}).status_code == 201
    r = client.post("/v1/sweeps", json={**SPEC, "steps": 6}, headers={"Idempotency-Key": "k"})
    assert r.status_code == 409 and "different spec" in r.json()["detail"]


def test_model_folder_with_a_broken_config_is_422(client, tmp_path):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text("{}")
    r = client.post("/v1/sweeps", json={**SPEC, "model": {"path": str(tmp_path / "m")}})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "model", "path"]


def test_preflight_refuses_more_cpus_than_the_cluster_has():
    from service.preflight import SpecError, preflight
    from service.settings import Settings
    from sweeps.spec import SweepSpec

    spec = SweepSpec.model_validate({**SPEC, "resources": {"cpus_per_trial": 64}})
    with pytest.raises(SpecError) as e:
        preflight(spec, Settings(), [{"CPU": 2.0}])
    assert e.value.loc == ("resources", "cpus_per_trial") and "allowed: more than 0 to 2" in e.value.msg


def test_paths_the_os_refuses_are_422_not_500(client):
    long_path = "0" * 4000  # found by schemathesis: "File name too long" escaped as a 500
    r = client.post("/v1/sweeps", json={**SPEC, "model": {"path": long_path}})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "model", "path"]
    r = client.post("/v1/sweeps", json={**SPEC, "task": {"name": "jsonl", "path": long_path}})
    assert r.status_code == 422


def test_the_same_new_idempotency_key_sent_at_once_gives_one_sweep(client):
    from concurrent.futures import ThreadPoolExecutor

    def post(_):
        return client.post("/v1/sweeps", json=SPEC, headers={"Idempotency-Key": "race"})

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(post, range(16)))
    assert sorted({r.status_code for r in answers}) in ([200, 201], [201])
    assert sum(r.status_code == 201 for r in answers) == 1
    assert len({r.json()["id"] for r in answers}) == 1
    assert len(client.get("/v1/sweeps").json()) == 1


def test_no_secret_of_the_tracking_uri_reaches_an_answer(make_client):
    with make_client(mlflow_tracking_uri="http://alice:s3cret-pw@127.0.0.1:9") as c:
        health = c.get("/v1/health")
        created = c.post("/v1/sweeps", json=SPEC)
        listed = c.get("/v1/sweeps")
    for r in (health, created, listed):
        assert "s3cret-pw" not in r.text
    assert health.json()["mlflow"]["detail"] == "http://alice:***@127.0.0.1:9"


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_the_api_docs_load_nothing_from_the_internet(client, page):
    """GPU clusters are often offline: the docs' scripts and styles come from the app (fastapi-offline)."""
    import re

    r = client.get(page)
    assert r.status_code == 200
    assets = re.findall(r'(?:src|href)="([^"]+)"', r.text)
    assert assets and all(a.startswith("/") for a in assets), assets  # no CDN
    assert all(client.get(a).status_code == 200 for a in assets)


def test_answer_is_queued_readable_and_checked(client):
    bandit = {**SPEC, "task": {"name": "bandit"}, "model": {"preset": "tabular"}, "answer": {"budget": 5000}}
    r = client.post("/v1/answers", json=bandit)
    assert r.status_code == 201 and r.json()["status"] == "queued"
    aid = r.json()["id"]
    assert client.get(f"/v1/answers/{aid}").json()["spec"]["answer"]["budget"] == 5000
    assert client.get(f"/v1/probes/{aid}").status_code == 404  # an answer is not a probe, nor the reverse
    pid = client.post("/v1/probes", json=bandit).json()["id"]
    assert client.get(f"/v1/answers/{pid}").status_code == 404
    small = client.post("/v1/answers", json={**bandit, "answer": {"budget": 100}})
    assert small.status_code == 422
    (err,) = small.json()["detail"]
    assert err["loc"] == ["body", "answer", "budget"] and "at least 128" in err["msg"]  # 8 prompts x 16 completions
    assert "/v1/answers" in client.get("/openapi.json").json()["paths"]

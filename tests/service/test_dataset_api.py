"""Dataset tasks at the HTTP layer: what is refused before anything is scheduled, and the keys a sweep is filed under."""

import shutil
from pathlib import Path

import pytest
from datasets import Dataset
from fastapi.testclient import TestClient

from service.main import create_app
from service.settings import Settings
from service.store import Probe, Sweep

BYO = Path(__file__).resolve().parents[2] / "sweeps" / "examples" / "byo"


@pytest.fixture
def roots(tmp_path):
    data, rewards = tmp_path / "data", tmp_path / "rewards"
    data.mkdir(), rewards.mkdir()
    shutil.copy(BYO / "train.parquet", data / "train.parquet")
    shutil.copy(BYO / "rewards.py", rewards / "rewards.py")
    return data, rewards


def _client(tmp_path, **settings):
    return TestClient(create_app(Settings(data_dir=tmp_path / "state", **settings), run_scheduler=False))


def _spec(data: Path, rewards: Path, **task):
    return {
        "name": "byo",
        "model": {"preset": "chat-tiny"},
        "group_sizes": [2, 4],
        "samples_per_step": [8],
        "steps": 2,
        "task": {
            "name": "dataset",
            "path": str(data / "train.parquet"),
            "label": "word-problems",
            "rewards": [{"function": f"{rewards / 'rewards.py'}:accuracy"}],
            **task,
        },
    }


def _error(r):
    assert r.status_code == 422, r.text
    (d,) = r.json()["detail"]
    return d["loc"], d["msg"]


def test_user_rewards_are_refused_until_the_server_enables_them(tmp_path, roots):
    data, rewards = roots
    with _client(tmp_path) as c:
        loc, msg = _error(c.post("/v1/sweeps", json=_spec(data, rewards)))
    assert loc == ["body", "task", "rewards", 0, "function"] and "GROUPSCALE_REWARD_ROOT" in msg and "built-in" in msg


def test_reward_servers_are_refused_unless_the_server_allows_their_url(tmp_path, roots):
    data, rewards = roots
    spec = _spec(data, rewards)
    spec["task"]["rewards"] = [{"url": "http://10.0.0.5:5000/get_reward", "request": "openrlhf"}]
    with _client(tmp_path) as c:
        loc, msg = _error(c.post("/v1/sweeps", json=spec))
    assert loc == ["body", "task", "rewards", 0, "url"] and "GROUPSCALE_REWARD_URLS" in msg and "disabled" in msg
    with _client(tmp_path, reward_urls="http://rm-host:5000/, http://127.0.0.1:") as c:
        loc, msg = _error(c.post("/v1/sweeps", json=spec))
        assert loc == ["body", "task", "rewards", 0, "url"] and "allowed: http://rm-host:5000/, http://127.0.0.1:" in msg
        spec["task"]["rewards"] = [{"url": "http://rm-host:5000/get_reward", "request": "openrlhf"}]
        loc, msg = _error(c.post("/v1/sweeps", json=spec))  # OpenRLHF's labels: default column label
        assert loc == ["body", "task", "rewards"] and "no column 'label'" in msg
        spec["task"]["rewards"][0]["answer_column"] = "solution"
        r = c.post("/v1/sweeps", json=spec)
        assert r.status_code == 201 and r.json()["spec"]["task"]["rewards"][0]["request"] == "openrlhf", r.text


def test_a_relative_reward_file_is_resolved_against_the_reward_root(tmp_path, roots):
    """Over HTTP a relative FILE is where the server takes user code from: under GROUPSCALE_REWARD_ROOT (it was
    resolved against the controller's working directory and refused as outside the root)."""
    data, rewards = roots
    spec = _spec(data, rewards)
    spec["task"]["rewards"] = [{"function": "rewards.py:accuracy"}, {"name": "numeric_match", "answer_column": "solution"}]
    with _client(tmp_path, reward_root=rewards) as c:
        r = c.post("/v1/sweeps", json=spec)
        assert r.status_code == 201, r.text
        stored = r.json()["spec"]["task"]["rewards"]
        assert stored[0]["function"] == f"{rewards / 'rewards.py'}:accuracy" and stored[1]["function"] is None
        assert c.post("/v1/sweeps", json=spec, headers={"Idempotency-Key": "k"}).status_code == 201
        assert c.post("/v1/sweeps", json=spec, headers={"Idempotency-Key": "k"}).status_code == 200  # the same spec
        spec["task"]["rewards"] = [{"function": "../data/rewards.py:accuracy"}]  # relative, but leaving the root
        loc, msg = _error(c.post("/v1/sweeps", json=spec))
        assert loc == ["body", "task", "rewards", 0, "function"] and "outside the reward root" in msg


def test_a_reward_file_outside_the_root_is_refused_after_resolving_links(tmp_path, roots):
    data, rewards = roots
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    shutil.copy(BYO / "rewards.py", outside / "rewards.py")
    (rewards / "link.py").symlink_to(outside / "rewards.py")
    with _client(tmp_path, reward_root=rewards) as c:
        for ref in (f"{rewards}/../elsewhere/rewards.py:accuracy", f"{rewards / 'link.py'}:accuracy"):
            spec = _spec(data, rewards)
            spec["task"]["rewards"] = [{"function": ref}]
            loc, msg = _error(c.post("/v1/sweeps", json=spec))
            assert loc[-1] == "function" and "outside the reward root" in msg


def test_a_reward_file_must_define_the_name_and_is_not_run(tmp_path, roots):
    data, rewards = roots
    (rewards / "boom.py").write_text("raise SystemExit('the controller ran me')\ndef other(completions, **kw):\n    return []\n")
    with _client(tmp_path, reward_root=rewards) as c:
        spec = _spec(data, rewards)
        spec["task"]["rewards"] = [{"function": f"{rewards / 'boom.py'}:accuracy"}]
        loc, msg = _error(c.post("/v1/sweeps", json=spec))
        assert "binds no top-level 'accuracy' (by def, class, assignment or import); its functions: ['other']" in msg
        # a name bound by an import, an assignment or inside a top-level block is found (and the file not run)
        (rewards / "bound.py").write_text(
            "raise SystemExit('ran')\nfrom trl.rewards import accuracy_reward as acc\ntry:\n    import numpy\n"
            "except ImportError:\n    numpy = None\nlength = len\n"
        )
        for name in ("acc", "numpy", "length"):
            spec["task"]["rewards"] = [{"function": f"{rewards / 'bound.py'}:{name}"}]
            assert c.post("/v1/sweeps", json=spec).status_code == 201, name
        (rewards / "bad.py").write_text("def (:\n")
        spec["task"]["rewards"] = [{"function": f"{rewards / 'bad.py'}:accuracy"}]
        assert "does not parse as Python" in _error(c.post("/v1/sweeps", json=spec))[1]


def test_data_files_must_lie_under_the_data_root(tmp_path, roots):
    data, rewards = roots
    other = tmp_path / "other"
    other.mkdir()
    shutil.copy(data / "train.parquet", other / "train.parquet")
    with _client(tmp_path, reward_root=rewards, data_root=data) as c:
        loc, msg = _error(c.post("/v1/sweeps", json=_spec(other, rewards)))
        assert loc == ["body", "task", "path"] and "GROUPSCALE_DATA_ROOT" in msg
        spec = _spec(data, rewards, eval_path=str(other / "train.parquet"))
        assert _error(c.post("/v1/sweeps", json=spec))[0] == ["body", "task", "eval_path"]


def test_missing_columns_and_empty_splits_name_the_field(tmp_path, roots):
    data, rewards = roots
    with _client(tmp_path, reward_root=rewards) as c:
        loc, msg = _error(c.post("/v1/sweeps", json=_spec(data, rewards, prompt_column="question")))
        assert loc == ["body", "task", "prompt_column"] and "its columns: ['prompt', 'solution']" in msg
        spec = _spec(data, rewards)
        spec["task"]["rewards"] = [{"name": "numeric_match", "answer_column": "answer"}]
        loc, msg = _error(c.post("/v1/sweeps", json=spec))
        assert loc == ["body", "task", "rewards"] and "no column 'answer'" in msg
        Dataset.from_list([{"prompt": "a", "solution": "1"}] * 5).to_parquet(str(data / "five.parquet"))
        spec = _spec(data, rewards, eval_fraction=0.05)
        spec["task"]["path"] = str(data / "five.parquet")
        loc, msg = _error(c.post("/v1/sweeps", json=spec))
        assert loc == ["body", "task", "eval_fraction"] and "5 rows" in msg


def test_numeric_match_on_references_that_are_not_numbers_is_refused_at_the_reward(tmp_path, roots):
    data, rewards = roots
    rows = [{"prompt": f"q{i}", "solution": str(i) if i < 50 else r"\frac{\pi}{2}"} for i in range(60)]
    Dataset.from_list(rows).to_parquet(str(data / "math.parquet"))
    spec = _spec(data, rewards, path=str(data / "math.parquet"))
    spec["task"]["rewards"] = [
        {"name": "exact_match", "answer_column": "solution"},
        {"name": "numeric_match", "answer_column": "solution"},
    ]
    with _client(tmp_path, reward_root=rewards) as c:
        loc, msg = _error(c.post("/v1/sweeps", json=spec))
    assert loc == ["body", "task", "rewards", 1, "name"] and "10 of the 60 references" in msg and "row 50" in msg
    assert (
        msg.endswith("use math_verify for MATH-style answers (roots, pi, intervals, expressions) (task.path)")
        and "pi}" not in msg
    )


def test_math_verify_is_refused_with_the_install_hint_when_missing(tmp_path, roots, monkeypatch):
    import service.preflight

    data, rewards = roots
    monkeypatch.setattr(service.preflight, "math_verify_available", lambda: False)
    spec = _spec(data, rewards)
    spec["task"]["rewards"] = [{"name": "math_verify", "answer_column": "solution"}]
    with _client(tmp_path, reward_root=rewards) as c:
        loc, msg = _error(c.post("/v1/sweeps", json=spec))
    assert loc[-1] == "name" and "math-verify" in msg


def test_sweeps_are_filed_under_content_and_config_digests(tmp_path, roots):
    data, rewards = roots
    model = tmp_path / "models" / "m"
    model.mkdir(parents=True)
    (model / "config.json").write_text('{"model_type": "llama", "vocab_size": 10}')
    with _client(tmp_path, reward_root=rewards) as c:
        first = c.post("/v1/sweeps", json=_spec(data, rewards))
        assert first.status_code == 201, first.text
        key = first.json()["task_key"]
        assert key.startswith("word-problems:") and len(key) == len("word-problems:") + 16
        assert first.json()["model_key"] == "chat-tiny"
        again = c.post("/v1/sweeps", json=_spec(data, rewards)).json()["task_key"]
        Dataset.from_list([{"prompt": "a", "solution": "1"}] * 20).to_parquet(str(data / "train.parquet"))
        changed = c.post("/v1/sweeps", json=_spec(data, rewards)).json()["task_key"]
        assert again == key and changed != key  # same label, other content: another task
        spec = _spec(data, rewards)
        spec["model"] = {"path": str(model)}
        r = c.post("/v1/sweeps", json=spec)
        assert r.status_code == 201, r.text
        assert r.json()["model_key"].startswith(f"{model.resolve()}@")


def test_recommendations_match_keys_and_refuse_ambiguous_labels(tmp_path):
    fit = {"status": "ok", "g_star": 4.0, "g_star_ci95": [3.0, 5.0], "recommended_group_size": 4, "message": "G* = 4"}
    with _client(tmp_path) as c:
        store = c.app.state.store
        with store.session() as s:
            for i, (task, model) in enumerate(
                [("math:aaaa", "chat-tiny"), ("math:bbbb", "chat-tiny"), ("arithmetic", "/m@1234")]
            ):
                s.add(Sweep(id=f"s{i}", name="n", status="succeeded", spec={}, task_name=task, model_name=model, fit=fit))
        assert c.get("/v1/recommendations", params={"task": "math:aaaa", "model": "chat-tiny"}).json()["sweep_id"] == "s0"
        assert c.get("/v1/recommendations", params={"task": "math:cccc", "model": "chat-tiny"}).status_code == 404
        r = c.get("/v1/recommendations", params={"task": "math", "model": "chat-tiny"})
        assert r.status_code == 409 and "math:aaaa" in r.json()["detail"] and "math:bbbb" in r.json()["detail"]
        r = c.get("/v1/recommendations", params={"task": "arithmetic", "model": "/m"})
        assert r.status_code == 200 and r.json()["model_key"] == "/m@1234"
        assert c.get("/v1/recommendations", params={"task": "arith", "model": "/m"}).status_code == 404


def test_a_recommendation_sets_the_latest_probe_of_its_task_and_model_beside_it(tmp_path):
    """The probe's G* against the sweep's, and a word on why they may differ when their intervals do not overlap."""
    spec = {
        "name": "p",
        "task": {"name": "arithmetic"},
        "model": {"preset": "tiny-llama"},
        "group_sizes": [2, 4, 8, 16],
        "samples_per_step": [16],
        "seeds": [0],
        "steps": 1,
    }
    fit = {"status": "ok", "g_star": 4.0, "g_star_ci95": [3.0, 5.0], "recommended_group_size": 4, "message": "G* = 4"}
    with _client(tmp_path) as c:
        store = c.app.state.store
        with store.session() as s:
            s.add(
                Sweep(id="s0", name="n", status="succeeded", spec=spec, task_name="arithmetic", model_name="tiny-llama", fit=fit)
            )
            s.add(Probe(id="p0", spec=spec, status="succeeded", result={"g_star": 12.0, "g_star_ci95": [11.0, 13.0]}))
            s.add(Probe(id="p1", spec={**spec, "model": {"preset": "tabular"}}, status="succeeded", result={"g_star": 4.1}))
        r = c.get("/v1/recommendations", params={"task": "arithmetic", "model": "tiny-llama"}).json()
        assert r["probe"]["id"] == "p0" and r["probe"]["g_star"] == 12.0
        assert "probe p0: G* = 12" in r["message"] and "do not overlap" in r["message"]


def test_a_finished_sweeps_fit_cites_the_named_answer_or_the_latest_of_its_spec_and_whom_to_trust(tmp_path):
    spec = {"name": "p", "task": {"name": "arithmetic"}, "model": {"preset": "tiny-llama"}, "group_sizes": [2, 4, 8, 16],
            "samples_per_step": [16], "seeds": [0], "steps": 1}  # fmt: skip
    fit = {"status": "ok", "g_star": 4.0, "g_star_ci95": [3.0, 5.0], "recommended_group_size": 4,
           "equivalent_group_sizes": [4], "evidence": "strong", "message": "G* = 4"}  # fmt: skip
    with _client(tmp_path) as c:
        with c.app.state.store.session() as s:
            s.add(
                Sweep(id="s0", name="n", status="succeeded", spec=spec, task_name="arithmetic", model_name="tiny-llama", fit=fit)
            )
            s.add(Sweep(id="s1", name="n", status="running", spec=spec, task_name="arithmetic", model_name="tiny-llama", fit=fit))
        assert "answer" not in c.get("/v1/sweeps/s0/fit").json()["message"]  # no answer yet: nothing to compare
        with c.app.state.store.session() as s:
            s.add(Probe(id="a0", kind="answer", spec=spec, status="succeeded", result={"recommended_group_size": 16}))
            s.add(Probe(id="a1", kind="answer", spec={**spec, "model": {"preset": "tabular"}}, status="succeeded",
                        result={"recommended_group_size": 4}))  # fmt: skip
        message = c.get("/v1/sweeps/s0/fit").json()["message"]
        assert "answer a0 (the latest of this spec): Its G = 16 is not among the sweep's best (4)" in message
        assert "the sweep is the one to trust" in message
        assert "answer a0" not in c.get("/v1/sweeps/s1/fit").json()["message"]  # a sweep still running is no reference
        with c.app.state.store.session() as s:  # later answers of the same task and model, asked of other settings
            s.add(Probe(id="a2", kind="answer", spec={**spec, "steps": 50}, status="succeeded",
                        result={"recommended_group_size": 4}))  # fmt: skip
            s.add(Probe(id="a3", kind="answer", spec={**spec, "name": "other", "seeds": [7]}, status="queued"))
        message = c.get("/v1/sweeps/s0/fit").json()["message"]  # another spec's answer, or one with no result: not cited
        assert "answer a0 (the latest of this spec)" in message and "a2" not in message
        named = c.get("/v1/sweeps/s0/fit", params={"answer": "a2"}).json()["message"]  # the one the user named
        assert "answer a2 (named): Its G = 4 is among the sweep's best (4)" in named and "a0" not in named
        r = c.get("/v1/sweeps/s0/fit", params={"answer": "nope"})
        assert r.status_code == 404 and "no answer with id 'nope'" in r.json()["detail"]
        r = c.get("/v1/sweeps/s0/fit", params={"answer": "a3"})
        assert r.status_code == 422 and "answer: 'a3' has no result (status queued)" in r.json()["detail"]
        with c.app.state.store.session() as s:  # the same question under another name and seeds: its answer speaks
            s.add(Probe(id="a4", kind="answer", spec={**spec, "name": "again", "seeds": [3, 4]}, status="succeeded",
                        result={"recommended_group_size": 4}))  # fmt: skip
        assert "answer a4 (the latest of this spec): Its G = 4" in c.get("/v1/sweeps/s0/fit").json()["message"]


def test_recommend_tells_the_byo_figures_story_as_fit_does(tmp_path):
    """sweeps/examples/byo's figures (tests/sweeps/test_verdict.py): the recommendation's verdict is the fit's."""
    from sweeps.fit import fit_law
    from sweeps.verdict import verdict
    from tests.sweeps.test_verdict import BYO

    fit = fit_law(*zip(*[(g, 32, s, y) for g, ys in BYO.items() for s, y in enumerate(ys)], strict=True))
    spec = {"name": "byo", "task": {"name": "arithmetic"}, "model": {"preset": "tiny-llama"}, "group_sizes": sorted(BYO),
            "samples_per_step": [32], "seeds": [0, 1], "steps": 1}  # fmt: skip
    with _client(tmp_path) as c:
        with c.app.state.store.session() as s:
            s.add(Sweep(id="b0", name="byo", status="succeeded", spec=spec, task_name="arithmetic", model_name="tiny-llama",
                        fit=fit.model_dump(mode="json")))  # fmt: skip
        r = c.get("/v1/recommendations", params={"task": "arithmetic", "model": "tiny-llama"}).json()
    assert r["recommended_group_size"] is None and r["comparison"]["best"] == 4
    assert verdict(r) == verdict(fit.model_dump(mode="json"))  # one story: the same line for recommend and fit
    assert "G = 4 has the lowest mean but is not shown better than G = 2" in verdict(r)


def _cli_over_the_app(c, monkeypatch) -> None:
    """The CLI's client commands speak to the TestClient ``c`` (an httpx.Client speaking to the app)."""
    from service.client import Client

    def over_the_app(url=None, token=None, timeout_s=30.0):
        client = Client("http://testserver")
        client._http = c
        return client

    monkeypatch.setattr("service.cli.results.Client", over_the_app)


def test_recommend_exports_a_trl_config_and_verl_overrides(tmp_path, monkeypatch):
    """`recommend --format trl|verl` over the real app: G from the fit, B and the loss settings from the sweep."""
    import yaml
    from typer.testing import CliRunner

    from service.cli import app as cli

    spec = {
        "name": "r",
        "task": {"name": "arithmetic"},
        "model": {"preset": "tiny-llama"},
        "group_sizes": [2, 4, 8],
        "samples_per_step": [32],
        "seeds": [0],
        "steps": 1,
        "grpo": {"loss_aggregation": "seq_mean_token_sum_norm", "advantage": "mean_std", "kl_beta": 0.04},
    }
    fit = {"status": "ok", "g_star": 4.2, "g_star_ci95": [3.5, 5.0], "recommended_group_size": 4, "message": "G* = 4.2"}
    with _client(tmp_path) as c:
        with c.app.state.store.session() as s:
            s.add(
                Sweep(id="s0", name="r", status="succeeded", spec=spec, task_name="arithmetic", model_name="tiny-llama", fit=fit)
            )

        _cli_over_the_app(c, monkeypatch)
        args = ["recommend", "--task", "arithmetic", "--model", "tiny-llama", "--format"]
        trl = CliRunner().invoke(cli, [*args, "trl"])
        assert trl.exit_code == 0, trl.output
        got = yaml.safe_load(trl.stdout)
        assert (got["num_generations"], got["generation_batch_size"]) == (4, 32)
        assert (got["loss_type"], got["scale_rewards"], got["beta"]) == ("dr_grpo", "group", 0.04)
        assert "sweep s0" in trl.stdout.splitlines()[0]
        assert (got["per_device_train_batch_size"], got["gradient_accumulation_steps"]) == (32, 1)  # one step of B
        assert "learning_rate" not in got  # a sweep's lr is tuned for its own model: not carried over
        on_four = yaml.safe_load(CliRunner().invoke(cli, [*args, "trl", "--num-processes", "4"]).stdout)
        assert (on_four["generation_batch_size"], on_four["per_device_train_batch_size"]) == (32, 8)  # 8 x 4 processes
        verl = CliRunner().invoke(cli, [*args, "verl", "--samples-per-step", "64"])
        assert verl.exit_code == 0, verl.output
        assert "actor_rollout_ref.rollout.n=4" in verl.stdout and "data.train_batch_size=16" in verl.stdout
        assert ".optim.lr=" not in verl.stdout
        bad = CliRunner().invoke(cli, [*args, "yaml"])
        assert bad.exit_code == 2 and "trl" in bad.output and "verl" in bad.output


def test_recommend_exports_an_empirical_fits_g_to_trl(tmp_path, monkeypatch):
    """A fit whose law does not beat a constant but whose best G wins the paired comparisons: the API and
    `recommend --format trl` give that G (evidence empirical), at the sweep's B and at another B it divides."""
    import yaml
    from typer.testing import CliRunner

    from service.cli import app as cli
    from sweeps.fit import fit_law

    kink = {2: 0.70, 3: 0.66, 4: 0.62, 6: 0.67, 8: 0.66, 12: 0.70, 16: 0.66}
    rows = [(g, 48, s, m + 0.002 * ((s * 7 + g) % 3 - 1)) for g, m in kink.items() for s in range(3)]
    fit = fit_law(*zip(*rows, strict=True)).model_dump(mode="json")
    assert fit["evidence"] == "empirical"
    spec = {"name": "k", "task": {"name": "arithmetic"}, "model": {"preset": "tiny-llama"}, "group_sizes": sorted(kink),
            "samples_per_step": [48], "seeds": [0, 1, 2], "steps": 1}  # fmt: skip
    with _client(tmp_path) as c:
        with c.app.state.store.session() as s:
            s.add(
                Sweep(id="k0", name="k", status="succeeded", spec=spec, task_name="arithmetic", model_name="tiny-llama", fit=fit)
            )
        r = c.get("/v1/recommendations", params={"task": "arithmetic", "model": "tiny-llama"}).json()
        assert (r["recommended_group_size"], r["evidence"]) == (4, "empirical") and r["comparison"]["best"] == 4
        at_64 = c.get("/v1/recommendations", params={"task": "arithmetic", "model": "tiny-llama", "samples_per_step": 64})
        assert at_64.json()["recommended_group_size"] == 4  # the measured G, not the law's pick

        _cli_over_the_app(c, monkeypatch)
        trl = CliRunner().invoke(cli, ["recommend", "--task", "arithmetic", "--model", "tiny-llama", "--format", "trl"])
        assert trl.exit_code == 0, trl.output
        assert yaml.safe_load(trl.stdout)["num_generations"] == 4


def test_recommend_for_an_engine_trl_sweep_prints_the_recipe_with_g_and_b(tmp_path, monkeypatch):
    import yaml
    from typer.testing import CliRunner

    from service.cli import app as cli

    recipe = {
        "learning_rate": "1e-6",
        "per_device_train_batch_size": 4,
        "gradient_accumulation_steps": 2,
        "steps_per_generation": 4,
    }
    spec = {"name": "r", "task": {"name": "arithmetic"}, "model": {"preset": "tiny-llama"}, "group_sizes": [2, 4, 8],
            "samples_per_step": [32], "steps": 1, "engine": "trl", "trl": recipe}  # fmt: skip
    fit = {"status": "ok", "g_star": 4.2, "g_star_ci95": [3.5, 5.0], "recommended_group_size": 4, "message": "G* = 4.2"}
    with _client(tmp_path) as c:
        with c.app.state.store.session() as s:
            s.add(
                Sweep(id="s0", name="r", status="succeeded", spec=spec, task_name="arithmetic", model_name="tiny-llama", fit=fit)
            )
        assert c.get("/v1/sweeps/s0").json()["step_structure"] == [
            "each generation of 32 completions feeds 2 optimizer step(s) of 16 (per_device_train_batch_size 4 x 1 "
            "process(es) x gradient_accumulation_steps 4, steps_per_generation 8)"
        ]

        _cli_over_the_app(c, monkeypatch)
        out = CliRunner().invoke(cli, ["recommend", "--task", "arithmetic", "--model", "tiny-llama", "--format", "trl"])
        assert out.exit_code == 0, out.output
        got = yaml.safe_load(out.stdout)
        assert got == {"learning_rate": "1e-6", "per_device_train_batch_size": 4, "gradient_accumulation_steps": 4,
                       "num_generations": 4, "generation_batch_size": 32}  # fmt: skip
        bad = CliRunner().invoke(
            cli, ["recommend", "--task", "arithmetic", "--model", "tiny-llama", "--format", "trl", "--num-processes", "3"]
        )
        assert bad.exit_code == 2 and "--num-processes: samples_per_step 32 cannot feed" in bad.output


def test_prompts_that_end_with_the_assistants_answer_are_accepted_with_a_warning_naming_the_column(tmp_path, roots):
    """A chat dataset's ``messages`` column, whose conversation ends with the reference answer: every prompt would
    show the model its solution. Accepted (a continued conversation may be meant), with a warning saying the fix."""
    data, rewards = roots
    rows = [{"messages": [{"role": "user", "content": f"{i}+1=?"}, {"role": "assistant", "content": str(i + 1)}],
             "solution": str(i + 1)} for i in range(10)]  # fmt: skip
    Dataset.from_list(rows).to_parquet(str(data / "chat.parquet"))
    spec = _spec(data, rewards, path=str(data / "chat.parquet"), prompt_column="messages")
    with _client(tmp_path, reward_root=rewards, data_root=data) as c:
        r = c.post("/v1/sweeps", json=spec)
        assert r.status_code == 201, r.text
        [warning] = r.json()["warnings"]
        assert warning.startswith("task.path: 10 of the first 10 prompts in column 'messages' end with an assistant turn")
        assert "give prompt_column a column of the user turns alone" in warning
        plain = c.post("/v1/sweeps", json={**_spec(data, rewards), "name": "plain"})
        assert plain.status_code == 201 and plain.json()["warnings"] == [], plain.text


@pytest.mark.parametrize(("framework", "file"), [("verl", "run_gspo.sh"), ("openrlhf", "train_grpo_flat.sh")])
def test_recommend_config_prints_the_users_file_with_the_measured_g_over_the_real_app(tmp_path, monkeypatch, framework, file):
    """`spec from-X FILE` swept, then `recommend --config FILE --format X`: the file back with only G and the keys tied
    to it changed; a sweep of another objective is refused (exit 1); --config with text is bad input (exit 2)."""
    from typer.testing import CliRunner

    from service.cli import app as cli
    from sweeps.frameworks import get_framework
    from sweeps.frameworks.importing import spec_from

    path = Path(__file__).resolve().parents[1] / "fixtures" / "frameworks" / framework / file
    imported, _ = spec_from(get_framework(framework), path, [])
    spec = {**imported, "task": {"name": "arithmetic"}, "model": {"preset": "tiny-llama"}}
    other = {**spec, "grpo": {**spec["grpo"], "importance_sampling_level": "token", "loss_aggregation": "token_mean"}}
    fit = {"status": "ok", "g_star": 7.5, "g_star_ci95": [6.0, 9.0], "recommended_group_size": 8, "message": "G* = 7.5"}
    with _client(tmp_path) as c:
        with c.app.state.store.session() as s:
            s.add(
                Sweep(id="s0", name="r", status="succeeded", spec=spec, task_name="arithmetic", model_name="tiny-llama", fit=fit)
            )
        _cli_over_the_app(c, monkeypatch)
        args = ["recommend", "--task", "arithmetic", "--model", "tiny-llama", "--format", framework, "--config", str(path)]
        got = CliRunner().invoke(cli, args)
        assert got.exit_code == 0, got.output
        before, after = path.read_text().splitlines(), got.stdout.splitlines()
        changed = sorted(a.strip(" \\") for b, a in zip(before, after, strict=True) if a != b)
        prompts = imported["samples_per_step"][0] // 8
        n, batch = (("actor_rollout_ref.rollout.n=", "data.train_batch_size=") if framework == "verl"
                    else ("--n_samples_per_prompt ", "--rollout_batch_size "))  # fmt: skip
        mini = [f"actor_rollout_ref.actor.ppo_mini_batch_size={prompts // 4}"] if framework == "verl" else []
        assert changed == sorted([f"{n}8", f"{batch}{prompts}", *mini])
        assert "G = 8 at B = " in got.stderr
        with c.app.state.store.session() as s:
            s.get(Sweep, "s0").spec = other
        refused = CliRunner().invoke(cli, args)
        assert refused.exit_code == 1 and "the sweep measured G for another objective" in refused.stderr
        assert refused.stdout == ""
        bad = CliRunner().invoke(cli, [*args[:-4], "--config", str(path)])
        assert bad.exit_code == 2 and "--format: 'text' with --config; allowed:" in bad.stderr

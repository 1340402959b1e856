"""The sweep-management commands over the real app (FastAPI TestClient as the HTTP transport):
trials, compare, fit --plot, --version, and a submit whose lost answer is retried under one key."""

import json

import httpx
import numpy as np
import pytest
import typer
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from service.cli import app as cli
from service.client import Client
from service.main import create_app
from service.settings import Settings
from service.store import Sweep, Trial

GRID = (2, 3, 4, 6, 8, 12, 16)


def _spec(name):
    return {
        "name": name,
        "task": {"name": "arithmetic"},
        "model": {"preset": "tiny-llama"},
        "group_sizes": list(GRID),
        "samples_per_step": [48],
        "seeds": [0, 1],
        "steps": 1,
    }


@pytest.fixture
def app_client(tmp_path, monkeypatch):
    """The app with two finished sweeps whose trials follow the law with G* = 4 and G* = 9, and the CLI
    pointed at it."""
    with TestClient(create_app(Settings(data_dir=tmp_path / "state"), run_scheduler=False)) as c:
        with c.app.state.store.session() as s:
            rng = np.random.default_rng(0)
            for sid, c_coef in (("s4", 0.09), ("s9", 0.64)):
                sweep = Sweep(
                    id=sid, name=sid, status="running", spec=_spec(sid), task_name="arithmetic", model_name="tiny-llama"
                )
                s.add(sweep)
                for i, (g, seed) in enumerate((g, seed) for g in GRID for seed in (0, 1)):
                    gap = 0.2 + 0.01 * g + c_coef / (g - 1) + 0.001 * float(rng.standard_normal())
                    s.add(
                        Trial(
                            sweep_id=sid,
                            position=i,
                            group_size=g,
                            samples_per_step=48,
                            seed=seed,
                            status="succeeded",
                            metrics={"gap": gap},
                            attempts=1,
                            mlflow_run_id=f"run-{sid}-{i}",
                        )
                    )

        def over_the_app(url=None, token=None, timeout_s=30.0):
            client = Client("http://testserver")
            client._http = c
            return client

        for module in ("service.cli.commands", "service.cli.results"):
            monkeypatch.setattr(f"{module}.Client", over_the_app)
        yield c


def run(*args, input=None):
    return CliRunner().invoke(cli, list(args), input=input)


def test_trials_lists_each_trial_with_its_metric(app_client):
    r = run("trials", "s4", "--json")
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)
    assert len(rows) == 14 and {t["group_size"] for t in rows} == set(GRID)
    text = run("trials", "s4").stdout
    assert "run-s4-0" in text and "succeeded" in text
    assert run("trials", "nope").exit_code == 2


def test_trials_keeps_an_mlflow_run_id_whole_at_80_columns(app_client):
    """A new user could not copy a run id cut to "26f6f39d08454acdaa..." at 80 columns."""
    run_id = "26f6f39d08454acdaa0d5e1f2b3c4d5e"
    with app_client.app.state.store.session() as s:
        trial = s.query(Trial).filter_by(sweep_id="s4", position=0).one()
        trial.mlflow_run_id, trial.status, trial.reason = run_id, "failed", "worker died twice (OOM?)"
    r = CliRunner().invoke(cli, ["trials", "s4"], env={"COLUMNS": "80"})
    assert r.exit_code == 0 and run_id in r.stdout and max(map(len, r.stdout.splitlines())) <= 80, r.stdout


def test_server_and_user_text_in_square_brackets_prints_as_it_is(app_client, capsys):
    """Rich read "[vllm]" as markup: "pip install 'groupscale[vllm]'" printed as "pip install 'groupscale'", and a
    watched sweep's "[running]" vanished."""
    hint = "trl.use_vllm: True needs vllm, which the workers lack: pip install 'groupscale[vllm]'"
    with app_client.app.state.store.session() as s:
        sweep = s.get(Sweep, "s4")
        sweep.name, sweep.status, sweep.error = "[bold]recipe[/bold]", "failed", hint
    r = run("status", "s4")
    assert r.exit_code == 0 and "s4 [bold]recipe[/bold]: failed" in r.stdout and hint in r.stdout, r.stdout
    from service.cli.app import _fail

    with pytest.raises(typer.Exit):
        _fail(hint, 2)
    assert capsys.readouterr().err == f"error: {hint}\n"


def test_compare_says_whether_the_intervals_overlap(app_client):
    r = run("compare", "s4", "s9", "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["fits"]["s4"]["g_star"] == pytest.approx(4.0, abs=0.3) and doc["fits"]["s9"]["g_star"] == pytest.approx(
        9.0, abs=0.8
    )
    assert doc["intervals_overlap"] is False and "do not overlap" in doc["message"]
    same = json.loads(run("compare", "s4", "s4", "--json").stdout)
    assert same["intervals_overlap"] is True


def test_fit_plot_writes_a_png(app_client, tmp_path):
    png = tmp_path / "fit.png"
    r = run("fit", "s4", "--plot", str(png))
    assert r.exit_code == 0, r.output
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
    bad = run("fit", "s4", "--plot", str(tmp_path / "missing" / "fit.png"))
    assert bad.exit_code == 2 and "--plot" in bad.output


def test_version():
    r = run("--version")
    assert r.exit_code == 0 and r.stdout.startswith("groupscale ")


def test_a_submit_whose_answer_was_lost_is_retried_and_makes_one_sweep(tmp_path):
    """The first POST reaches the server and stores the sweep, then the connection drops before the answer;
    the client sends it again under the same Idempotency-Key and gets the same sweep back."""
    with TestClient(create_app(Settings(data_dir=tmp_path / "state"), run_scheduler=False)) as c:
        calls = []

        class DropFirstAnswer(httpx.BaseTransport):
            def handle_request(self, request):
                calls.append(request.headers.get("idempotency-key"))
                answer = c._transport.handle_request(request)
                body = answer.read()
                if len(calls) == 1:
                    raise httpx.ReadError("connection reset after the server answered")
                return httpx.Response(answer.status_code, headers=answer.headers, content=body)

        client = Client("http://testserver")
        client._http = httpx.Client(base_url="http://testserver", transport=DropFirstAnswer())
        sweep = client.submit(_spec("retried"), "key-1")
        assert len(calls) == 2 and calls[0] == calls[1] == "key-1"
        assert [s["id"] for s in c.get("/v1/sweeps").json()] == [sweep["id"]]
        with pytest.raises(httpx.ReadError):  # without a key a lost answer is not retried: it could make two
            calls.clear()
            client.submit(_spec("unkeyed"))
        assert len(calls) == 1


def test_extend_adds_only_the_new_trials_and_reopens_the_sweep(app_client):
    c = app_client
    with c.app.state.store.session() as s:
        s.get(Sweep, "s4").status = "succeeded"
    r = run("extend", "s4", "--group-sizes", "24", "--seeds", "2")
    assert r.exit_code == 0, r.output
    assert "s4: added 10 trials to the 14 there were; running, 14 of 24 done" in " ".join(r.output.split())
    trials = c.get("/v1/sweeps/s4/trials").json()
    new = [t for t in trials if t["status"] == "pending"]
    # G = 24 at seeds 0, 1, 2 and seed 2 at the 7 old G: 10 new; the 14 finished ones are kept as they were
    assert len(trials) == 24 and len(new) == 10
    assert {(t["group_size"], t["seed"]) for t in new} == {(24, 0), (24, 1), (24, 2)} | {(g, 2) for g in GRID}
    with c.app.state.store.read() as s:
        assert sorted(t.position for t in s.get(Sweep, "s4").trials) == list(range(24))  # the run order goes on
    sweep = c.get("/v1/sweeps/s4").json()
    assert sweep["status"] == "running" and sweep["spec"]["group_sizes"] == [*GRID, 24] and sweep["spec"]["seeds"] == [0, 1, 2]
    again = c.post("/v1/sweeps/s4/extend", json={"seeds": [3]})
    assert again.status_code == 409 and "running" in again.json()["detail"]  # not while its new trials run


@pytest.mark.parametrize(
    "body, status, words",
    [
        ({"group_sizes": [5]}, 422, "valid group sizes for B=48"),
        ({"group_sizes": [4], "seeds": [0]}, 422, "nothing to add"),
        ({"group_sizes": [24], "extra": 1}, 422, "unknown field"),
    ],
)
def test_extend_refuses_bad_input_naming_it(app_client, body, status, words):
    with app_client.app.state.store.session() as s:
        s.get(Sweep, "s4").status = "succeeded"
    r = app_client.post("/v1/sweeps/s4/extend", json=body)
    assert r.status_code == status and words in json.dumps(r.json()), r.json()
    assert len(app_client.get("/v1/sweeps/s4/trials").json()) == 14  # nothing accepted
    assert app_client.get("/v1/sweeps/s4").json()["status"] == "succeeded"


def test_delete_removes_a_finished_sweep_and_refuses_a_running_one(app_client, tmp_path):
    c = app_client
    refused = run("delete", "s9", "--yes")
    assert refused.exit_code == 2 and "running" in refused.output  # s9 still runs: nothing removed
    assert c.get("/v1/sweeps/s9").status_code == 200
    with c.app.state.store.session() as s:
        sweep = s.get(Sweep, "s4")
        sweep.status, sweep.mlflow_closed = "succeeded", True
        trial_id = sweep.trials[0].id
    ckpt = tmp_path / "state" / "checkpoints" / trial_id
    ckpt.mkdir(parents=True)
    (ckpt / "checkpoint.pt").write_bytes(b"x")
    assert run("delete", "s4", input="n\n").exit_code == 1  # asked, and declined
    r = run("delete", "s4", "--yes")
    assert r.exit_code == 0, r.output
    assert c.get("/v1/sweeps/s4").status_code == 404 and not ckpt.exists()
    with c.app.state.store.read() as s:
        assert s.query(Trial).filter_by(sweep_id="s4").count() == 0
    assert [w["id"] for w in c.get("/v1/sweeps").json()] == ["s9"]


def test_status_shows_cancelled_counts_within_80_columns(app_client):
    with app_client.app.state.store.session() as s:
        s.get(Sweep, "s9").trials[0].status = "cancelled"
    r = CliRunner().invoke(cli, ["status"], env={"COLUMNS": "80"})
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80, r.stdout
    assert "cancel" in lines[0] and any("s9" in line and " 1 " in line for line in lines)
    one = run("status", "s9").stdout
    assert "cancelled 1" in one


def test_status_keeps_ids_and_g_star_whole_in_80_columns_and_cuts_the_name(app_client):
    """A fitted sweep with a long name and a real-length id: in 80 columns G* and the id stay whole (they are read
    and copied), every fit status too; the name gives way with an ellipsis."""
    from sweeps.fit import fit_law

    with app_client.app.state.store.session() as s:
        sweep = s.get(Sweep, "s4")
        sweep.name = "arithmetic-tiny-llama-long-sweep-name-2026"
        sweep.status = "succeeded"
        t = sweep.trials
        sweep.fit = fit_law(
            [x.group_size for x in t], [48] * len(t), [x.seed for x in t], [x.metrics["gap"] for x in t]
        ).model_dump()
        g_star = sweep.fit["g_star"]
        s.get(Sweep, "s9").fit = {"status": "insufficient_data", "g_star": None}
    r = CliRunner().invoke(cli, ["status"], env={"COLUMNS": "80"})
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80, r.stdout
    row = next(line for line in lines if line.startswith("s4 "))
    assert f" {g_star:.3g} " in row and "…" in row and "2026" not in row, row
    assert any("insufficient_data" in line for line in lines), r.stdout


def test_compare_warns_when_the_sweeps_measure_different_things(app_client):
    with app_client.app.state.store.session() as s:
        s.get(Sweep, "s9").spec = {**_spec("s9"), "task": {"name": "bandit"}, "model": {"preset": "tabular"}}
    r = run("compare", "s4", "s9", "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["differ_in"] == ["task", "model"]
    assert doc["message"].startswith(
        "warning: the sweeps differ in task and model (arithmetic, tiny-llama vs bandit, tabular), so their G* answer "
        "different questions; "
    )
    same = json.loads(run("compare", "s4", "s4", "--json").stdout)
    assert same["differ_in"] == [] and not same["message"].startswith("warning")
    text = " ".join(run("compare", "s4", "s9").output.split())
    assert "warning: the sweeps differ in task and model" in text


@pytest.mark.parametrize(
    "answer, line",
    [
        (
            {
                "recommended_group_size": 3,
                "g_star": 2.6,
                "g_star_ci95": [1.0, 4.26],
                "evidence": "weak",
                "evidence_reason": "the interval of G* [1, 4.26] spans more than half the grid (in log G)",
            },
            "use G = 3, weak evidence: anything from 2 to 4 is as good (G* = 2.6, 95% CI [1, 4.26]); the interval of G* "
            "[1, 4.26] spans more than half the grid (in log G)",
        ),
        (
            {
                "recommended_group_size": 4,
                "g_star": 4.1,
                "g_star_ci95": [3.7, 4.4],
                "evidence": "strong",
                "equivalent_group_sizes": [4],
                "evidence_reason": "the law beats a constant",
            },
            "use G = 4, strong evidence: G = 4 is clearly best (G* = 4.1, 95% CI [3.7, 4.4])",
        ),
        (
            {
                "recommended_group_size": 4,
                "g_star": 4.6,
                "g_star_ci95": [3.2, 6.9],
                "evidence": "strong",
                "equivalent_group_sizes": [4, 5, 6],
            },
            "use G = 4, strong evidence: anything from 4 to 6 is as good (G* = 4.6, 95% CI [3.2, 6.9])",
        ),
        (
            {
                "recommended_group_size": 2,
                "g_star": None,
                "g_star_ci95": None,
                "evidence": "weak",
                "status": "boundary",
                "g_star_bound": {"side": "below", "group_size": 2},
                "evidence_reason": "G* lies at the edge of the grid",
            },
            "use G = 2, weak evidence: G* lies below the grid's edge (2) (G* has no interval); G* lies at the edge of the grid",
        ),
        (
            {
                "recommended_group_size": None,
                "status": "boundary",
                "evidence": "none",
                "evidence_reason": "the law does not fit better than a constant (F = 11.3, p = 0.21)",
            },
            "no G to recommend (boundary): the law does not fit better than a constant (F = 11.3, p = 0.21)",
        ),
        (
            {
                "recommended_group_size": 4,
                "g_star": 4.4,
                "g_star_ci95": [3.69, 6.53],
                "evidence": "strong",
                "equivalent_group_sizes": [8, 4],
            },
            "use G = 4, strong evidence: G = 4 and 8 are as good (G* = 4.4, 95% CI [3.69, 6.53])",
        ),
    ],
    ids=["weak", "strong", "strong with ties", "boundary", "none", "ties on a sparse grid"],
)
def test_the_answer_line_carries_the_evidence_and_the_interval_in_words(answer, line):
    from service.cli.render import verdict

    assert verdict(answer) == line


def test_recommend_and_fit_end_on_the_answer_line(app_client):
    with app_client.app.state.store.session() as s:
        s.get(Sweep, "s4").status = "succeeded"
    fit = run("fit", "s4")
    assert fit.exit_code == 0, fit.output
    assert fit.stdout.strip().splitlines()[-1].startswith("use G = 4, ")


def test_fit_prints_g_star_at_each_checkpoint_and_the_test_over_training_time():
    from service.cli.render import out, print_fit
    from sweeps.fit import LawFit, StepFit, TimeUniversality

    steps = [StepFit(step=10, status="ok", g_star=3.2), StepFit(step=20, status="boundary")]
    time = TimeUniversality(message="2 of 2 (G, B) cells have one trial: ... (add seeds)")
    fit = LawFit(status="ok", metric="gap", g_star=3.2, by_step=steps, time_universality=time).model_dump(mode="json")
    with out.capture() as printed:
        print_fit(fit)
    assert "G* over training time: T=10: 3.2, T=20: -; 2 of 2 (G, B) cells have one trial" in " ".join(printed.get().split())
    with out.capture() as printed:
        print_fit({**fit, "by_step": [], "time_universality": None})
    assert "over training time" not in printed.get()


@pytest.mark.parametrize("group_sizes, warned", [([2, 8], True), ([2, 4, 8], True), ([2, 4, 8, 16], False)])
def test_submit_says_when_too_few_group_sizes_leave_the_law_unfittable(app_client, tmp_path, group_sizes, warned):
    """A new user's 2-G sweep trained and only then heard "insufficient_data ... the law needs at least 4"."""
    path = tmp_path / "few.yaml"
    path.write_text(json.dumps({**_spec("few"), "group_sizes": group_sizes, "samples_per_step": [16]}))
    r = CliRunner().invoke(cli, ["submit", str(path)])
    assert r.exit_code == 0, r.output
    warning = (
        f"warning: {len(group_sizes)} distinct group sizes: the law a + b G + c/(G-1) needs at least 4 to be fitted, "
        "so this sweep's fit will be insufficient_data (its trials are recorded all the same)"
    )
    assert (warning in r.stderr) is warned, r.stderr
    assert [s["name"] for s in app_client.get("/v1/sweeps").json()].count("few") == 1  # accepted all the same


def test_fit_gives_the_reason_once_on_its_last_line():
    """A new user read the same reason three times: after "evidence: none", as "no recommendation: ...", and on the
    answer line. What the last line says is not printed before it; what it does not say is."""
    from service.cli.render import out, print_fit
    from sweeps.fit import LawFit

    reason = "the law does not fit better than a constant (F = 0.025, p = 0.98)"
    fit = LawFit(status="boundary", metric="gap", evidence="none", evidence_reason=reason)
    fit.message = f"2 rows without a value left out; no recommendation: {reason}"
    with out.capture() as printed:
        print_fit(fit.model_dump(mode="json"))
    lines = printed.get().splitlines()
    assert " ".join(printed.get().split()).count(reason) == 1 and lines[-1] == f"no G to recommend (boundary): {reason}"
    assert "evidence: none" in lines and "2 rows without a value left out" in lines


def test_a_spec_files_yaml_numbers_reach_the_server_as_written_or_are_refused_naming_the_key(app_client, tmp_path):
    """`lr: 1e-6` was refused as "not a valid number" (YAML 1.1 reads it as text) and `064` became B = 52, `010` the
    seed 8. Now the first is 1e-6 in the stored sweep, and the others exit 2 naming the key and both readings."""
    path = tmp_path / "s.yaml"
    head = "name: yaml12\ntask: {name: arithmetic}\nmodel: {preset: tiny-llama}\ngroup_sizes: [2, 4, 8, 16]\n"
    path.write_text(head + "samples_per_step: [64]\nseeds: [0, 1]\nsteps: 1\ngrpo: {lr: 1e-6}\n")
    r = CliRunner().invoke(cli, ["submit", str(path)])
    assert r.exit_code == 0, r.output
    (stored,) = [s for s in app_client.get("/v1/sweeps").json() if s["name"] == "yaml12"]
    assert stored["spec"]["grpo"]["lr"] == 1e-6 and stored["spec"]["samples_per_step"] == [64]
    for line, said in (
        ("samples_per_step: [064]\nseeds: [0]\n", "samples_per_step[0] (line 5): 064 is 52 to YAML 1.1 (PyYAML, TRL) but 64"),
        ("samples_per_step: [64]\nseeds: [0, 010]\n", "seeds[1] (line 6): 010 is 8 to YAML 1.1 (PyYAML, TRL) but 10"),
    ):
        path.write_text(head + line)
        r = CliRunner().invoke(cli, ["submit", str(path)])
        assert r.exit_code == 2 and said in " ".join(r.output.split()), r.output
    assert [s["name"] for s in app_client.get("/v1/sweeps").json()].count("yaml12") == 1  # nothing more was sent


def test_a_report_to_a_folder_that_is_not_there_is_one_line_naming_the_option_and_exit_2(app_client, tmp_path):
    """It was a 36-line traceback (exit 1). Every path a command cannot use is one line naming the option, exit 2."""
    target = tmp_path / "no" / "such" / "r.html"
    r = run("report", "s4", "--out", str(target))
    assert r.exit_code == 2 and isinstance(r.exception, SystemExit), r.output
    assert r.stderr.splitlines() == [f"error: --out {target}: No such file or directory (no folder {target.parent})"]
    folder = tmp_path / "a-folder"
    folder.mkdir()
    r = run("report", "s4", f"--out={folder}")
    assert r.exit_code == 2 and r.stderr.splitlines() == [f"error: --out {folder}: Is a directory"], r.output


def _no_g_to_recommend(app_client) -> str:
    from sweeps.fit import LawFit

    reason = "the law does not fit better than a constant (F = 0.025, p = 0.98)"
    fit = LawFit(status="boundary", metric="gap", evidence="none", evidence_reason=reason)
    fit.message = f"no recommendation: {reason}"
    with app_client.app.state.store.session() as s:
        sweep = s.get(Sweep, "s4")
        sweep.status, sweep.fit = "succeeded", fit.model_dump(mode="json")
    return f"no G to recommend (boundary): {reason}"


@pytest.mark.parametrize(
    "fmt", [[], ["--format", "text"], ["--format", "json"], ["--json"], ["--format", "trl"], ["--format", "verl"]]
)
def test_recommend_with_nothing_to_recommend_exits_1_in_every_format_saying_why_once(app_client, fmt):
    """Text exited 0 and printed the reason twice, --format trl exited 1: one rule now (docs: CLI reference)."""
    sentence = _no_g_to_recommend(app_client)
    r = run("recommend", "--task", "arithmetic", "--model", "tiny-llama", *fmt)
    assert r.exit_code == 1, r.output
    if fmt in ([], ["--format", "text"]):
        lines = r.stdout.splitlines()
        assert lines == ["from sweep s4 (fit boundary), task arithmetic, model tiny-llama:", sentence] and r.stderr == ""
    elif "json" in fmt or "--json" in fmt:
        assert json.loads(r.stdout)["recommended_group_size"] is None and r.stderr == ""
    else:  # stdout is a config file to paste: nothing on it, the reason on stderr
        assert r.stdout == "" and r.stderr.splitlines() == [f"error: {sentence}"]


def _rows_of(text: str, key: str) -> list[str]:
    return [line for line in text.splitlines() if key in line]


def test_status_at_80_columns_keeps_every_sweeps_id_status_progress_and_g_star_whole_on_its_line(app_client):
    """Real ids (12 characters), a long name, a fit status of 17 characters and a cancelled trial: the table used to
    squeeze every column to fit ("0c1d2e3f4a…", "succeed…", "3…") because the columns it kept whole did not fit 80."""
    with app_client.app.state.store.session() as s:
        for sid, name, status, fit in (
            ("0c1d2e3f4a5b", "byo-word-problems-qwen-0.5b-long-name", "succeeded", {"status": "insufficient_data"}),
            ("9f8e7d6c5b4a", "arithmetic-tiny", "cancelled", {"status": "ok", "g_star": 3.2133}),
        ):
            spec = _spec(name)
            s.add(Sweep(id=sid, name=name, status=status, spec=spec, task_name="arithmetic", model_name="tiny-llama", fit=fit))
            for i, g in enumerate(GRID * 2):
                done = "cancelled" if status == "cancelled" and i == 0 else "succeeded"
                s.add(Trial(sweep_id=sid, position=i, group_size=g, samples_per_step=48, seed=i // 7, status=done, attempts=1))
    r = CliRunner().invoke(cli, ["status"], env={"COLUMNS": "80"})
    assert r.exit_code == 0, r.output
    assert max(len(line) for line in r.stdout.splitlines()) <= 80, r.stdout
    (header,) = _rows_of(r.stdout, "G*")
    assert {"id", "name", "status", "done", "G*", "fit"} <= set(header.split()), r.stdout
    (first,) = _rows_of(r.stdout, "0c1d2e3f4a5b")
    assert {"succeeded", "14/14", "insufficient_data"} <= set(first.split()) and "byo-word" in first, first
    (second,) = _rows_of(r.stdout, "9f8e7d6c5b4a")
    assert {"cancelled", "13/14", "3.21", "arithmetic-tiny"} <= set(second.split()), second


def test_trials_at_80_columns_keeps_each_trials_g_status_and_run_on_one_line_and_its_reason_whole(app_client):
    """A failed trial's reason used to wrap inside the status column, one word a line, cut ("(GROUPSC…")."""
    reason = "the worker died 3 times (GROUPSCALE_TRIAL_RETRIES=2): RayActorError: The actor died unexpectedly"
    with app_client.app.state.store.session() as s:
        trial = s.query(Trial).filter_by(sweep_id="s4", position=5).one()
        trial.status, trial.reason, trial.metrics = "failed", reason, {}
        trial.mlflow_run_id = run_id = "26f6f39d08454acdaa0d5e1f2b3c4d5e"
    r = CliRunner().invoke(cli, ["trials", "s4"], env={"COLUMNS": "80"})
    assert r.exit_code == 0, r.output
    assert max(len(line) for line in r.stdout.splitlines()) <= 80, r.stdout
    (row,) = _rows_of(r.stdout, run_id)
    assert row.split()[:4] == ["4", "48", "1", "failed"], row  # G, B, seed, status on the run's line
    assert reason in " ".join(r.stdout.split()), r.stdout  # whole, folded at word ends if it must be
    assert len(_rows_of(r.stdout, "run-s4-")) == 13 and all("succeeded" in line for line in _rows_of(r.stdout, "run-s4-"))


def test_watch_into_a_pipe_prints_a_line_as_each_change_happens(app_client, monkeypatch, capsys):
    """Not a terminal (a pipe, a log file, CI): rich's live bar printed nothing until the sweep had ended."""
    from types import SimpleNamespace

    from service.cli import commands, render

    store = app_client.app.state.store
    with store.session() as s:
        for t in s.get(Sweep, "s4").trials:
            t.status = "pending"
    changes = [0, 1, None, 2]  # each poll's wait: that trial ends (None: nothing changes)
    printed = []  # what the watch had printed when its next wait came

    def sleep(_):
        printed.append(capsys.readouterr().err)  # progress: stderr, stdout keeps the end's line alone
        position = changes.pop(0) if changes else "end"
        with store.session() as s:
            sweep = s.get(Sweep, "s4")
            if position == "end":
                sweep.status = "succeeded"
            elif position is not None:
                next(t for t in sweep.trials if t.position == position).status = "succeeded"

    monkeypatch.setattr(render, "time", SimpleNamespace(sleep=sleep))
    with pytest.raises(typer.Exit) as ended:
        commands.watch("s4")
    assert ended.value.exit_code == 0
    lines = [chunk.splitlines() for chunk in printed]
    assert [len(chunk) for chunk in lines] == [1, 1, 1, 0, 1], printed  # a line a change, none when nothing changed
    assert [chunk[0].split()[-1] for chunk in lines if chunk] == ["0/14", "1/14", "2/14", "3/14"], printed
    assert all("s4 [running]" in chunk[0] for chunk in lines if chunk), printed
    rest = capsys.readouterr()
    assert (rest.err.splitlines(), rest.out.splitlines()) == (["s4 [succeeded] running=0 failed=0 3/14"], ["s4: succeeded"])


def test_answer_says_which_mlflow_experiment_and_run_hold_it(app_client, tmp_path, monkeypatch):
    """An answer's run has an experiment of its own (``<task's>/answers``): the answer names it and links its run."""
    from types import SimpleNamespace

    from service.cli import results
    from service.store import Probe
    from tests.service.test_mlflow_runs import ANSWER

    path = tmp_path / "spec.yaml"
    path.write_text(json.dumps({**_spec("a"), "task": {"name": "bandit"}, "model": {"preset": "tabular"}}))
    url = "http://127.0.0.1:5000/#/experiments/7/runs/f00d?workflowType=machine_learning"
    where = {"experiment": "groupscale/bandit/answers", "experiment_id": "7", "run_id": "f00d", "url": url}

    def sleep(_):  # the scheduler's part: the queued answer ends
        with app_client.app.state.store.session() as s:
            for job in s.query(Probe).filter_by(status="queued"):
                job.status, job.result, job.mlflow_run_id = "succeeded", {**ANSWER, "mlflow": where}, "f00d"

    monkeypatch.setattr(results, "time", SimpleNamespace(sleep=sleep))
    r = run("answer", str(path), "--budget", "5000")
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert f"MLflow: {url} (experiment groupscale/bandit/answers)" in lines, r.stdout
    assert lines[-1] == ANSWER["message"]  # still the last line
    as_json = run("answer", str(path), "--budget", "5000", "--json")
    assert json.loads(as_json.stdout)["mlflow"] == where


def test_a_report_cites_the_answer_named_with_answer_and_no_other(app_client, tmp_path):
    """`report ID --answer X` printed X's paragraph beside a verdict citing whichever answer of the task ran last."""
    from service.store import Probe

    fit = app_client.get("/v1/sweeps/s4/fit").json()
    with app_client.app.state.store.session() as s:
        sweep = s.get(Sweep, "s4")
        sweep.status, sweep.fit = "succeeded", {**fit, "message": "G* = 4"}
        s.add(Probe(id="named", kind="answer", spec=_spec("s4"), status="succeeded",
                    result={"recommended_group_size": 16, "evidence": "weak", "g_star_ci95": [9, 20]}))  # fmt: skip
    with app_client.app.state.store.session() as s:  # a later answer of the same spec
        s.add(Probe(id="later", kind="answer", spec=_spec("s4"), status="succeeded", result={"recommended_group_size": 4}))
    html = tmp_path / "r.html"
    r = run("report", "s4", "--answer", "named", "--out", str(html))
    assert r.exit_code == 0, r.output
    text = " ".join(html.read_text().split())
    assert "answer named (named): Its G = 16" in text and "Answer G* = -" in text and "later" not in text
    assert run("report", "s4", "--out", str(html)).exit_code == 0
    assert "answer later (the latest of this spec)" in html.read_text()
    r = run("report", "s4", "--answer", "nope", "--out", str(html))
    assert r.exit_code == 2 and "no answer with id 'nope'" in r.output


@pytest.mark.parametrize("fmt", ["trl", "verl"])
def test_recommend_for_a_trainer_refuses_a_sweep_of_a_token_budget_and_says_what_to_set(app_client, fmt):
    """A trainer's settings fix completions a step; a tokens_per_step sweep fixed tokens: no file is printed."""
    fit = app_client.get("/v1/sweeps/s4/fit").json()
    with app_client.app.state.store.session() as s:
        sweep = s.get(Sweep, "s4")
        sweep.status, sweep.fit, sweep.spec = "succeeded", fit, {**_spec("s4"), "tokens_per_step": 100}
    r = run("recommend", "--task", "arithmetic", "--model", "tiny-llama", "--format", fmt)
    assert r.exit_code == 1 and r.stdout == "", r.output
    said = " ".join(r.stderr.split())
    assert "a budget of 100 completion tokens a step (tokens_per_step)" in said and "100 / (G x your mean" in said, said

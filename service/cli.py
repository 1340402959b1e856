"""The `groupscale` command line. Client commands call the HTTP API (GROUPSCALE_URL, GROUPSCALE_API_TOKEN).

Exit codes: 0 success, 1 failure, 2 bad input. ``--json`` prints one JSON document.
"""

from __future__ import annotations

import csv
import json
import math
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Annotated, Any, NoReturn

import httpx
import typer
from pydantic import ValidationError
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from service.client import ApiError, Client
from sweeps.finite import finite_or_none
from sweeps.law import fit_law
from sweeps.spec import SweepSpec, load_spec

app = typer.Typer(help="groupscale: choose the GRPO group size G.", no_args_is_help=True, add_completion=False)
law_app = typer.Typer(help="The group-size law, offline.", no_args_is_help=True)
app.add_typer(law_app, name="law")
models_app = typer.Typer(help="Built-in model presets.", no_args_is_help=True)
app.add_typer(models_app, name="models")
out = Console()
err = Console(stderr=True)
EXAMPLES = Path(__file__).resolve().parent.parent / "sweeps" / "examples"
TERMINAL = {"succeeded", "failed", "cancelled"}

UrlOpt = Annotated[str | None, typer.Option("--url", help="controller URL (default $GROUPSCALE_URL or http://127.0.0.1:8000)")]
JsonOpt = Annotated[bool, typer.Option("--json", help="print one JSON document")]


def _fail(msg: str, code: int = 1) -> NoReturn:
    err.print(f"[red]error:[/red] {msg}", highlight=False)
    raise typer.Exit(code)


def _api(fn, *args: Any) -> Any:
    """Call the API; 4xx input errors exit 2, other errors exit 1, each with the server's reasons."""
    try:
        return fn(*args)
    except ApiError as e:
        if e.status == 404 and not e.is_json:
            _fail(f"the server at {e.url} is not a groupscale controller (check --url / GROUPSCALE_URL)")
        if isinstance(e.detail, list):
            lines = [f"{'.'.join(str(p) for p in d.get('loc', []) if p != 'body')}: {d.get('msg')}" for d in e.detail]
            _fail("the server refused the input:\n  " + "\n  ".join(lines), 2)
        _fail(f"{e.detail} (HTTP {e.status})", 2 if e.status in (400, 404, 409, 413, 422) else 1)
    except httpx.HTTPError as e:
        _fail(f"cannot reach the controller ({e}); start it with `groupscale up` or set GROUPSCALE_URL")


def _print_json(doc: Any) -> None:
    typer.echo(json.dumps(doc, indent=2, allow_nan=False))


def _fmt(v: float | None, digits: int = 3) -> str:
    return "-" if v is None else f"{v:.{digits}g}"


def print_fit(fit: dict) -> None:
    """Human summary of a fit (the JSON shape of sweeps.law.LawFit)."""
    t = Table(title=f"group-size law fit ({fit['metric']}, {'higher' if fit['maximize'] else 'lower'} is better)")
    for col in ("B", "status", "G*", "a", "b", "c", "R²", "recommended G"):
        t.add_column(col)
    for b in fit["per_budget"]:
        t.add_row(
            str(b["samples_per_step"]),
            b["status"],
            _fmt(b["g_star"]),
            _fmt(b["a"]),
            _fmt(b["b"]),
            _fmt(b["c"]),
            _fmt(b["r2"]),
            str(b["recommended_group_size"] or "-"),
        )
    out.print(t)
    ci = fit.get("g_star_ci95")
    out.print(
        f"status: [bold]{fit['status']}[/bold]   G* = {_fmt(fit['g_star'])}"
        f"   95% CI = {'[' + ', '.join(_fmt(v) for v in ci) + ']' if ci else '-'}"
        f"   recommended G = [bold]{fit['recommended_group_size'] or '-'}[/bold]"
    )
    uni = fit.get("universality")
    if uni:
        out.print(f"universality: shared G* = {_fmt(uni['shared_g_star'])}; {uni['message']}")
    if fit.get("message"):
        out.print(fit["message"], highlight=False)


def _free_port(preferred: int) -> int:
    for candidate in (preferred, 0):
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds: TIME_WAIT is no obstacle
            try:
                s.bind(("127.0.0.1", candidate))
                return s.getsockname()[1]
            except OSError:
                continue
    raise RuntimeError("no free port")


@app.command()
def up(
    host: Annotated[str, typer.Option(help="bind address of the API")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535)] = 8000,
    mlflow_port: Annotated[int, typer.Option(min=1, max=65535)] = 5000,
    data_dir: Annotated[Path, typer.Option(help="SQLite store, MLflow data, model cache")] = Path(".groupscale"),
) -> None:
    """Run MLflow, a local Ray head and the controller in the foreground (Ctrl-C stops all)."""
    from service.stack import StackConfigError, StackError, run_stack

    try:
        run_stack(host, port, mlflow_port, data_dir)
    except StackError as e:
        _fail(str(e), 2 if isinstance(e, StackConfigError) else 1)


def watch_sweep(client: Client, sweep_id: str, interval_s: float = 1.0) -> dict:
    """Progress bar until the sweep ends; returns the final sweep."""
    sweep = _api(client.sweep, sweep_id)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=err) as bar:
        task = bar.add_task(sweep["name"], total=sweep["progress"]["total"])
        while True:
            p = sweep["progress"]
            extra = ""
            if p.get("tuning_total") and p["tuning_done"] < p["tuning_total"]:
                extra += f" tuning lr {p['tuning_done']}/{p['tuning_total']}"
            if p.get("g_star_ci95") and None not in p["g_star_ci95"]:
                extra += f" G* in [{p['g_star_ci95'][0]:.3g}, {p['g_star_ci95'][1]:.3g}]"
            bar.update(
                task,
                completed=p["done"] + p["failed"] + p.get("cancelled", 0),
                total=p["total"],
                description=f"{sweep['name']} [{sweep['status']}] running={p['running']} failed={p['failed']}{extra}",
            )
            if sweep["status"] in TERMINAL:
                return sweep
            time.sleep(interval_s)
            sweep = _api(client.sweep, sweep_id)


def _read_spec(spec_path: Path) -> SweepSpec:
    """Load and validate a spec file; bad input exits 2 with every field error."""
    if not spec_path.is_file():
        _fail(f"SPEC.yaml: {spec_path} is {'a directory' if spec_path.is_dir() else 'not there'}; give a spec file", 2)
    try:
        return load_spec(spec_path)
    except ValidationError as e:
        lines = [f"{'.'.join(map(str, d['loc']))}: {d['msg']}" for d in e.errors()]
        _fail(f"{spec_path} is not a valid sweep spec:\n  " + "\n  ".join(lines), 2)
    except Exception as e:  # noqa: BLE001 - YAML syntax and type errors alike are bad input
        _fail(f"{spec_path}: {e}", 2)


@app.command()
def submit(
    spec_path: Annotated[Path, typer.Argument(metavar="SPEC.yaml", help="sweep spec (YAML or JSON)")],
    watch: Annotated[bool, typer.Option("--watch", help="show progress until the sweep ends")] = False,
    url: UrlOpt = None,
) -> None:
    """Submit a sweep; prints its id (last line)."""
    spec = _read_spec(spec_path)
    client = Client(url)
    sweep = _api(client.submit, spec.model_dump(mode="json"))
    if sweep["mlflow"]["url"]:
        err.print(f"MLflow: {sweep['mlflow']['url']}")
    typer.echo(sweep["id"])
    if watch:
        final = watch_sweep(client, sweep["id"])
        raise typer.Exit(0 if final["status"] == "succeeded" else 1)


@app.command()
def status(
    sweep_id: Annotated[str | None, typer.Argument(metavar="[ID]")] = None, url: UrlOpt = None, as_json: JsonOpt = False
) -> None:
    """One sweep's status, or a table of all sweeps."""
    client = Client(url)
    if sweep_id:
        sweep = _api(client.sweep, sweep_id)
        if as_json:
            return _print_json(sweep)
        p = sweep["progress"]
        out.print(
            f"{sweep['id']} {sweep['name']}: [bold]{sweep['status']}[/bold]  done {p['done']}/{p['total']}, "
            f"running {p['running']}, failed {p['failed']}" + (f"  error: {sweep['error']}" if sweep["error"] else "")
        )
        if sweep["mlflow"]["url"]:
            out.print(f"MLflow: {sweep['mlflow']['url']}")
        return None
    sweeps = _api(client.sweeps)
    if as_json:
        return _print_json(sweeps)
    t = Table()
    t.add_column("id", no_wrap=True, min_width=12)  # ids must stay whole to be copied
    for col in ("name", "status", "done/total", "fit", "G*", "created"):
        t.add_column(col)
    for w in sweeps:
        p = w["progress"]
        t.add_row(
            w["id"],
            w["name"],
            w["status"],
            f"{p['done']}/{p['total']}",
            w["fit_status"] or "-",
            _fmt(w["g_star"]),
            w["created_at"][:19],
        )
    out.print(t)
    return None


@app.command()
def watch(sweep_id: Annotated[str, typer.Argument(metavar="ID")], url: UrlOpt = None) -> None:
    """Progress bar until the sweep ends (exit 0 when it succeeded)."""
    final = watch_sweep(Client(url), sweep_id)
    out.print(f"{final['id']}: {final['status']}" + (f" ({final['error']})" if final["error"] else ""))
    raise typer.Exit(0 if final["status"] == "succeeded" else 1)


@app.command()
def cancel(sweep_id: Annotated[str, typer.Argument(metavar="ID")], url: UrlOpt = None) -> None:
    """Cancel a sweep: pending trials never start, running ones are stopped."""
    sweep = _api(Client(url).cancel, sweep_id)
    out.print(f"{sweep['id']}: {sweep['status']}")


@app.command()
def fit(sweep_id: Annotated[str, typer.Argument(metavar="ID")], url: UrlOpt = None, as_json: JsonOpt = False) -> None:
    """The law fit of a sweep (provisional while it runs)."""
    doc = _api(Client(url).fit, sweep_id)
    _print_json(doc) if as_json else print_fit(doc)


@app.command()
def recommend(
    task: Annotated[str, typer.Option(help="a sweep's task_key (arithmetic, my-math:1f2e...), or a dataset's label")],
    model: Annotated[str, typer.Option(help="a sweep's model_key, a preset name, or a model folder's path")],
    samples_per_step: Annotated[int | None, typer.Option(min=2, help="your budget B")] = None,
    url: UrlOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Which G to use for a task and model (from the finished sweeps)."""
    rec = _api(Client(url).recommend, task, model, samples_per_step)
    if as_json:
        return _print_json(rec)
    out.print(
        f"use G = [bold]{rec['recommended_group_size'] or '-'}[/bold] (G* = {_fmt(rec['g_star'])}, "
        f"fit {rec['status']}, sweep {rec['sweep_id']}, task {rec['task_key']}, model {rec['model_key']})"
    )
    out.print(rec["message"], highlight=False)
    return None


@models_app.command("export")
def models_export(
    preset: Annotated[str, typer.Argument(metavar="PRESET", help="chat-tiny or tiny-llama")],
    folder: Annotated[Path, typer.Argument(metavar="DIR", help="where the model folder is written (must not exist)")],
    task: Annotated[str, typer.Option(help="tiny-llama only: the built-in task it is warm-started on")] = "arithmetic",
) -> None:
    """Write a built-in preset as a plain Hugging Face model folder (point model.path at it)."""
    from service.settings import get_settings
    from workers.models.presets import LM_PRESETS, preset_path
    from workers.tasks import make_task

    if preset not in LM_PRESETS:
        _fail(f"PRESET: unknown preset {preset!r}; allowed: {', '.join(LM_PRESETS)}", 2)
    if preset == "tiny-llama" and task != "arithmetic":
        _fail(f"--task: tiny-llama is exported warm-started on a built-in task; allowed: arithmetic (got {task!r})", 2)
    if folder.exists():
        _fail(f"DIR: {folder} exists; give a new folder", 2)
    built = preset_path(preset, make_task({"name": task}), get_settings().model_cache_dir)
    shutil.copytree(built, folder)
    out.print(f"{preset} written to {folder} (load it with model: {{path: {folder.resolve()}}})")


def read_results(path: Path, y: str) -> tuple[list[int], list[int], list[int], list[float]]:
    """Columns group_size, samples_per_step, seed and y of a CSV. An empty or NaN y is missing (dropped later).

    Raises:
        ValueError: a missing column or a non-integer group_size/samples_per_step/seed (names row and column).
    """
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        need = ["group_size", "samples_per_step", "seed", y]
        missing = [c for c in need if c not in (reader.fieldnames or [])]
        if missing:
            raise ValueError(f"{path} lacks column(s) {', '.join(missing)}; found: {', '.join(reader.fieldnames or [])}")
        cols: tuple[list, list, list, list] = ([], [], [], [])
        for i, row in enumerate(reader, start=2):
            for col, name in zip(cols[:3], need[:3]):
                try:
                    col.append(int(float(row[name])))
                except (TypeError, ValueError):
                    raise ValueError(f"{path}:{i}: {name} must be an integer, got {row[name]!r}") from None
            value = (row[y] or "").strip()
            try:  # an empty cell or NaN is a missing value (dropped and counted); other text is an error
                cols[3].append(float(value) if value else math.nan)
            except ValueError:
                raise ValueError(f"{path}:{i}: {y} must be a number (or empty for a missing value), got {value!r}") from None
    if any(g < 2 for g in cols[0]):
        raise ValueError(f"{path}: group_size must be >= 2")
    return cols


@law_app.command("fit")
def law_fit(
    results: Annotated[Path, typer.Argument(metavar="RESULTS.csv", help="one row per trial")],
    y: Annotated[str, typer.Option("--y", help="metric column (a gap: lower is better)")],
    maximize: Annotated[bool, typer.Option("--maximize", help="the metric is higher-is-better")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Fit gap(G) = a + b G + c/(G-1) per budget (THEORY.md) to a results table."""
    if not results.is_file():
        _fail(f"RESULTS.csv: no file {results}", 2)
    try:
        g, b, s, v = read_results(results, y)
    except ValueError as e:
        _fail(str(e), 2)
    doc = fit_law(g, b, s, v, metric=y, maximize=maximize).model_dump(mode="json")
    _print_json(doc) if as_json else print_fit(doc)


@app.command()
def probe(
    spec_path: Annotated[Path, typer.Argument(metavar="SPEC.yaml", help="spec with task, model and a probe section")],
    local: Annotated[bool, typer.Option("--local", help="run here instead of on the controller's Ray cluster")] = False,
    url: UrlOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Estimate tau2, sigma2, kappa and G* from one batch of K x M rollouts (no sweep)."""
    spec = _read_spec(spec_path)
    if local:
        from service.settings import get_settings
        from sweeps.planner import plan_trials
        from workers.config import TrialConfig
        from workers.probe import run_probe

        cfg = TrialConfig.from_spec(spec, plan_trials(spec)[0], get_settings().model_cache_dir)
        p = spec.probe
        try:
            result = run_probe(cfg, p.prompts, p.completions, p.projection_dim, p.seed, parameters=p.parameters)
        except (ValueError, OSError) as e:  # a model or data file that cannot be used: bad input
            _fail(f"{type(e).__name__}: {(str(e).splitlines() or [''])[0]}", 2)
    else:
        client = Client(url)
        job = _api(client.probe, spec.model_dump(mode="json"))
        with err.status(f"probe {job['id']}: {spec.probe.prompts} prompts x {spec.probe.completions} completions"):
            while job["status"] not in TERMINAL:
                time.sleep(1)
                job = _api(client.get_probe, job["id"])
        if job["status"] != "succeeded":
            _fail(f"probe {job['id']} {job['status']}: {job['error']}")
        result = job["result"]
    if as_json:
        return _print_json(finite_or_none(result))
    ci = result["g_star_ci95"]
    out.print(
        f"tau2 = {_fmt(result['tau2'])}, sigma2 = {_fmt(result['sigma2'])}, kappa = {_fmt(result['kappa'])}"
        f"  ->  G* = [bold]{_fmt(result['g_star'])}[/bold], 95% CI [{_fmt(ci[0])}, {_fmt(ci[1])}]"
        f"  ({result['samples']} samples, {result['seconds']:.1f} s)"
    )
    if "exact" in result:
        ex = result["exact"]
        out.print(
            f"exact: tau2 = {_fmt(ex['tau2'])}, sigma2 = {_fmt(ex['sigma2'])}, kappa = {_fmt(ex['kappa'])}, "
            f"G* = {_fmt(ex['g_star'])}"
        )
    out.print(result["message"], highlight=False)
    return None


@app.command()
def demo(
    keep: Annotated[bool, typer.Option("--keep", help="leave the stack running for browsing")] = False,
    data_dir: Annotated[Path, typer.Option()] = Path(".groupscale"),
    spec_path: Annotated[Path, typer.Option("--spec")] = EXAMPLES / "arithmetic-tiny.yaml",
) -> None:
    """Start the stack, run the example sweep, print the fit, the recommendation and the MLflow URL."""
    from service.stack import StackError, stop_process_group, up_command, wait_until_up

    port, mlflow_port = _free_port(8000), _free_port(5000)
    data_dir.mkdir(parents=True, exist_ok=True)
    log_path = data_dir.resolve() / "up.log"
    cmd = up_command(port, mlflow_port, data_dir)
    err.print(f"starting the stack (log: {log_path}) ...")
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        client = Client(f"http://127.0.0.1:{port}")
        try:
            up = wait_until_up(f"{client.url}/v1/health", proc, 300, "groupscale up")
        except StackError as e:
            _fail(f"{e}; see {log_path}")
        if not up:
            _fail(f"the stack did not answer within 300 s; see {log_path}")
        spec = load_spec(spec_path)
        sweep = _api(client.submit, spec.model_dump(mode="json"))
        err.print(f"submitted sweep {sweep['id']} ({spec.n_trials} trials) over HTTP")
        final = watch_sweep(client, sweep["id"])
        if final["status"] != "succeeded":
            _fail(f"sweep {final['id']} ended {final['status']}: {final['error']}")
        print_fit(_api(client.fit, sweep["id"]))
        trials = _api(client.trials, sweep["id"])
        t = Table(title="eval accuracy (expected, held-out) before and after GRPO, mean over seeds")
        for col in ("G", "N=B/G", "before", "after"):
            t.add_column(col)
        for g in sorted({tr["group_size"] for tr in trials}):
            ok = [tr for tr in trials if tr["group_size"] == g and tr["status"] == "succeeded"]
            if ok:
                t.add_row(
                    str(g),
                    str(ok[0]["prompts_per_step"]),
                    f"{sum(tr['metrics']['eval_accuracy_initial'] for tr in ok) / len(ok):.3f}",
                    f"{sum(tr['metrics']['eval_accuracy'] for tr in ok) / len(ok):.3f}",
                )
        out.print(t)
        rec = _api(client.recommend, spec.task.name, spec.model.label, None)
        out.print(
            f"recommendation for task={spec.task.name} model={spec.model.label}: "
            f"use G = [bold]{rec['recommended_group_size'] or '-'}[/bold] ({rec['status']})"
        )
        url = final["mlflow"]["url"]
        note = "" if keep else f"  (the stack stops now; `groupscale up --data-dir {data_dir}` serves it again)"
        out.print(f"MLflow run: {url}{note}", soft_wrap=True)
        if keep:
            out.print(
                f"stack left running: API http://127.0.0.1:{port}/docs, MLflow http://127.0.0.1:{mlflow_port}; Ctrl-C stops it"
            )
            proc.wait()
    except KeyboardInterrupt:
        pass
    finally:
        stop_process_group(proc, grace_s=30)


def main() -> None:
    app()


if __name__ == "__main__":
    main()

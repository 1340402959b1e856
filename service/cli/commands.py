"""The controller's commands: up (runs it) and, over HTTP, submit, status, watch, cancel, fit, recommend, probe (also --local)."""

from __future__ import annotations

import time
import uuid
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from service.cli.app import TERMINAL, JsonOpt, UrlOpt, _api, _fail, _fmt, _ints, _print_json, _read_spec, app, err, out
from service.cli.render import print_fit, watch_sweep
from service.client import Client
from sweeps.finite import finite_or_none


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


@app.command()
def submit(
    spec_path: Annotated[Path, typer.Argument(metavar="SPEC.yaml", help="sweep spec (YAML or JSON)")],
    watch: Annotated[bool, typer.Option("--watch", help="show progress until the sweep ends")] = False,
    url: UrlOpt = None,
) -> None:
    """Submit a sweep; prints its id (last line)."""
    spec = _read_spec(spec_path)
    client = Client(url)
    sweep = _api(client.submit, spec.model_dump(mode="json"), str(uuid.uuid4()))  # a retry under this key never makes two
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
            f"running {p['running']}, failed {p['failed']}, cancelled {p['cancelled']}"
            + (f"  error: {sweep['error']}" if sweep["error"] else "")
        )
        if sweep["mlflow"]["url"]:
            out.print(f"MLflow: {sweep['mlflow']['url']}")
        return None
    sweeps = _api(client.sweeps)
    if as_json:
        return _print_json(sweeps)
    t = Table(padding=(0, 1), pad_edge=False)  # fits 80 columns with a 12-character id
    t.add_column("id", no_wrap=True, min_width=12)  # ids must stay whole to be copied
    t.add_column("name", max_width=18, overflow="ellipsis", no_wrap=True)
    for col in ("status", "done", "cancel", "fit", "G*", "created"):
        t.add_column(col, no_wrap=True)
    for w in sweeps:
        p = w["progress"]
        t.add_row(
            w["id"],
            w["name"],
            w["status"],
            f"{p['done']}/{p['total']}",
            str(p["cancelled"]),
            w["fit_status"] or "-",
            _fmt(w["g_star"]),
            w["created_at"][5:16].replace("T", " "),  # MM-DD HH:MM (UTC)
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
def fit(
    sweep_id: Annotated[str, typer.Argument(metavar="ID")],
    plot: Annotated[Path | None, typer.Option("--plot", help="also write gap vs G with the fitted curves to this PNG")] = None,
    url: UrlOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """The law fit of a sweep (provisional while it runs)."""
    doc = _api(Client(url).fit, sweep_id)
    _print_json(doc) if as_json else print_fit(doc)
    if plot is not None:
        from sweeps.law import LawFit  # scipy and matplotlib: only when a plot is asked for
        from sweeps.plots import plot_fit

        try:
            plot_fit(LawFit.model_validate(doc), title=sweep_id).savefig(plot, format="png")
        except OSError as e:
            _fail(f"--plot: cannot write {plot}: {e.strerror or e}", 2)
        err.print(f"plot written to {plot}")


@app.command()
def extend(
    sweep_id: Annotated[str, typer.Argument(metavar="ID")],
    group_sizes: Annotated[str, typer.Option(help="group sizes to add, comma-separated (e.g. 24,32)")] = "",
    seeds: Annotated[str, typer.Option(help="seeds to add, comma-separated (e.g. 3,4)")] = "",
    watch: Annotated[bool, typer.Option("--watch", help="show progress until the sweep ends")] = False,
    url: UrlOpt = None,
) -> None:
    """Add group sizes or seeds to a finished sweep: only the new trials run, then all are fitted again."""
    if not group_sizes and not seeds:
        _fail("give --group-sizes or --seeds (or both)", 2)
    client = Client(url)
    sweep = _api(client.extend, sweep_id, _ints("--group-sizes", group_sizes), _ints("--seeds", seeds))
    p = sweep["progress"]
    out.print(f"{sweep['id']}: {sweep['status']}, {p['done']} of {p['total']} trials done (the new ones run now)")
    if watch:
        final = watch_sweep(client, sweep["id"])
        raise typer.Exit(0 if final["status"] == "succeeded" else 1)


@app.command()
def delete(
    sweep_id: Annotated[str, typer.Argument(metavar="ID")],
    yes: Annotated[bool, typer.Option("--yes", help="do not ask for confirmation")] = False,
    url: UrlOpt = None,
) -> None:
    """Delete a finished sweep: its trials and fit, its MLflow runs (to MLflow's deleted stage), its checkpoints."""
    if not yes and not typer.confirm(f"delete sweep {sweep_id} and its MLflow runs?"):
        _fail("not deleted", 1)
    done = _api(Client(url).delete, sweep_id)
    out.print(f"{done['id']}: deleted ({done['mlflow_runs_deleted']} MLflow runs moved to the deleted stage)")


@app.command()
def trials(sweep_id: Annotated[str, typer.Argument(metavar="ID")], url: UrlOpt = None, as_json: JsonOpt = False) -> None:
    """A sweep's trials: G, B, seed, status, the final metric and the MLflow run."""
    rows = _api(Client(url).trials, sweep_id)
    if as_json:
        return _print_json(rows)
    t = Table(title=f"trials of {sweep_id}")
    for col in ("G", "B", "seed", "status", "gap / grad_mse", "attempts", "MLflow run"):
        t.add_column(col)
    for r in rows:
        metrics = r.get("metrics") or {}
        value = metrics.get("gap", metrics.get("grad_mse"))
        t.add_row(
            str(r["group_size"]),
            str(r["samples_per_step"]),
            str(r["seed"]),
            r["status"] + (f" ({r['reason']})" if r.get("reason") else ""),
            _fmt(value, 4),
            str(r["attempts"]),
            r.get("mlflow_run_id") or "-",
        )
    out.print(t)
    return None


@app.command()
def compare(
    first: Annotated[str, typer.Argument(metavar="ID1")],
    second: Annotated[str, typer.Argument(metavar="ID2")],
    url: UrlOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Two sweeps' fits side by side: G*, intervals, evidence, and whether the intervals overlap."""
    client = Client(url)
    fits = {sid: _api(client.fit, sid) for sid in (first, second)}
    a, b = (fits[first].get("g_star_ci95"), fits[second].get("g_star_ci95"))
    closed = all(ci and None not in ci for ci in (a, b))
    overlap = bool(closed and a[0] <= b[1] and b[0] <= a[1])
    verdict = (
        ("the G* intervals overlap: the data do not tell the two G* apart" if overlap else "the G* intervals do not overlap")
        if closed
        else "no comparison of intervals: a fit has no closed interval (see its status)"
    )
    if as_json:
        return _print_json({"fits": fits, "intervals_overlap": overlap if closed else None, "message": verdict})
    t = Table()
    for col in ("sweep", "status", "G*", "95% CI", "use G", "evidence"):
        t.add_column(col)
    for sid, f in fits.items():
        ci = f.get("g_star_ci95")
        t.add_row(
            sid,
            f["status"],
            _fmt(f.get("g_star")),
            "[" + ", ".join(_fmt(v) for v in ci) + "]" if ci else "-",
            str(f.get("recommended_group_size") or "-"),
            str(f.get("evidence") or "-"),
        )
    out.print(t)
    out.print(verdict, highlight=False)
    return None


@app.command()
def report(
    sweep_id: Annotated[str, typer.Argument(metavar="ID")],
    out_path: Annotated[Path, typer.Option("--out", help="the HTML file to write")] = Path("report.html"),
    probe: Annotated[str | None, typer.Option(help="a probe's id: its G* is set beside the sweep's")] = None,
    url: UrlOpt = None,
) -> None:
    """Write a sweep's report: one self-contained HTML file (plots inlined) to read or send."""
    from sweeps.law import LawFit  # scipy and matplotlib: only for this command
    from sweeps.report import render_report

    client = Client(url)
    sweep, fit = _api(client.sweep, sweep_id), _api(client.fit, sweep_id)
    probe_result = _api(client.get_probe, probe).get("result") if probe else None
    out_path.write_text(render_report(LawFit.model_validate(fit), f"{sweep['name']} ({sweep_id})", probe_result))
    out.print(f"report written to {out_path}")


class RecommendFormat(StrEnum):
    text = "text"
    json = "json"
    trl = "trl"
    verl = "verl"


@app.command()
def recommend(
    task: Annotated[str, typer.Option(help="a sweep's task_key (arithmetic, my-math:1f2e...), or a dataset's label")],
    model: Annotated[str, typer.Option(help="a sweep's model_key, a preset name, or a model folder's path")],
    samples_per_step: Annotated[int | None, typer.Option(min=2, help="your budget B")] = None,
    fmt: Annotated[
        RecommendFormat,
        typer.Option(
            "--format", help="text; json; trl: a GRPOConfig YAML; verl: hydra overrides (with the sweep's loss settings)"
        ),
    ] = RecommendFormat.text,
    url: UrlOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Which G to use for a task and model (from the finished sweeps), in groupscale's terms or as TRL / verl settings."""
    client = Client(url)
    rec = _api(client.recommend, task, model, samples_per_step)
    if as_json or fmt is RecommendFormat.json:
        return _print_json(rec)
    if fmt is RecommendFormat.text:
        out.print(
            f"use G = [bold]{rec['recommended_group_size'] or '-'}[/bold] (G* = {_fmt(rec['g_star'])}, "
            f"fit {rec['status']}, sweep {rec['sweep_id']}, task {rec['task_key']}, model {rec['model_key']})"
        )
        out.print(rec["message"], highlight=False)
        return None
    g = rec["recommended_group_size"]
    if g is None:
        _fail(f"no recommended G to export: {rec['message']}")
    from sweeps.recipes import trl_config, verl_overrides
    from sweeps.spec import SweepSpec

    spec = SweepSpec.model_validate(_api(client.sweep, rec["sweep_id"])["spec"])
    budget = samples_per_step or max(b for b in spec.samples_per_step if b % g == 0)
    head = (
        f"groupscale: G = {g} at B = {budget} (G* = {_fmt(rec['g_star'])}, evidence {rec['evidence']}), sweep {rec['sweep_id']}"
    )
    if fmt is RecommendFormat.trl:
        typer.echo(trl_config(g, budget, spec.grpo, header=head), nl=False)
    else:
        lines, notes = verl_overrides(g, budget, spec.grpo)
        typer.echo("\n".join([f"# {head}", *(f"# note: {n}" for n in notes), *lines]))
    return None


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

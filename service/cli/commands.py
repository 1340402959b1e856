"""The commands that run the controller and a sweep's life: up, and over HTTP submit, status, watch, cancel, extend, delete."""

from __future__ import annotations

import os
import signal
import sys
import uuid
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from service.cli.app import JsonOpt, UrlOpt, _api, _fail, _ints, _print_json, _read_spec, app, err, out
from service.cli.render import watch_sweep
from service.cli.tables import Col, print_listing
from service.client import Client
from sweeps.verdict import fmt


@app.command()
def up(
    host: Annotated[str, typer.Option(help="bind address of the API")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535)] = 8000,
    mlflow_port: Annotated[int, typer.Option(min=1, max=65535)] = 5000,
    data_dir: Annotated[
        Path | None, typer.Option(help="SQLite store, MLflow data, model cache [default: $GROUPSCALE_DATA_DIR or .groupscale]")
    ] = None,
) -> None:
    """Run MLflow, a local Ray head and the controller in the foreground (Ctrl-C stops all)."""
    from service.lifetime import StackConfigError, StackError, interrupt_on_ctrl_c_and_sigterm, interrupted

    # First of all, before the seconds of imports: Ctrl-C and SIGTERM stop `up` from here on, in the background of a
    # script too (started with SIGINT ignored; one sent before this line, in Python's own start, is lost).
    previous = interrupt_on_ctrl_c_and_sigterm()
    try:
        from service.settings import Settings
        from service.stack import run_stack

        run_stack(host, port, mlflow_port, data_dir or Settings().data_dir)
    except StackError as e:
        _fail(str(e), 2 if isinstance(e, StackConfigError) else 1)
    except (KeyboardInterrupt, Exception) as e:  # Ctrl-C or SIGTERM: run_stack has stopped what had started
        # An error after one is its KeyboardInterrupt, wrapped: pydantic-core's SchemaError when it landed in the
        # import of FastAPI's models (1 of 50 starts of the soak test, tests/e2e/test_up_lifetime.py).
        if not isinstance(e, KeyboardInterrupt) and not interrupted():
            raise
        # The interpreter's shutdown after Ray's driver has crashed (SIGSEGV) or exited 0: leave now, with Ctrl-C's status.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(130)
    finally:  # `up` run inside another process (tests) leaves its handlers as they were
        for signum, handler in previous.items():
            if handler is not None:  # None: not set from Python, and not settable back
                signal.signal(signum, handler)


@app.command()
def submit(
    spec_path: Annotated[Path, typer.Argument(metavar="SPEC.yaml", help="sweep spec (YAML or JSON)")],
    watch: Annotated[bool, typer.Option("--watch", help="show progress until the sweep ends")] = False,
    url: UrlOpt = None,
) -> None:
    """Submit a sweep; prints its id (last line)."""
    from sweeps.fit.curve import N_PARAMS

    spec = _read_spec(spec_path)
    if (k := len(set(spec.group_sizes))) <= N_PARAMS:  # accepted (its trials and metrics are worth having), but said
        err.print(
            f"warning: {k} distinct group sizes: the law a + b G + c/(G-1) needs at least {N_PARAMS + 1} to be fitted, "
            "so this sweep's fit will be insufficient_data (its trials are recorded all the same)",
            highlight=False,
            soft_wrap=True,
        )
    client = Client(url)
    sweep = _api(client.submit, spec.request(), str(uuid.uuid4()))  # a retry under this key never makes two
    for warning in sweep.get("warnings", []):
        err.print(f"warning: {warning}", highlight=False, soft_wrap=True)
    if sweep["mlflow"]["url"]:
        err.print(f"MLflow: {sweep['mlflow']['url']}", soft_wrap=True, highlight=False)
    typer.echo(sweep["id"])
    if watch:
        final = watch_sweep(client, sweep["id"], link_shown=bool(sweep["mlflow"]["url"]))
        raise typer.Exit(0 if final["status"] == "succeeded" else 1)


# ids, statuses, progress and G* are read or copied: whole at any width; the name gives way, then the least read columns
SWEEP_COLUMNS = (
    Col("id"),
    Col("name", rank=1, shrink=True),
    Col("status"),
    Col("done", justify="right"),
    Col("cancel", rank=3, justify="right"),
    Col("fit", rank=2),
    Col("G*", justify="right"),
    Col("created", rank=3),
)


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
            f"{escape(sweep['id'])} {escape(sweep['name'])}: [bold]{escape(sweep['status'])}[/bold]  done {p['done']}/"
            f"{p['total']}, running {p['running']}, failed {p['failed']}, cancelled {p['cancelled']}"
            + (f"  error: {escape(sweep['error'])}" if sweep["error"] else ""),
            markup=True,
            soft_wrap=True,
        )
        if sweep["mlflow"]["url"]:
            out.print(f"MLflow: {sweep['mlflow']['url']}", soft_wrap=True, highlight=False)
        return None
    sweeps = _api(client.sweeps)
    if as_json:
        return _print_json(sweeps)
    rows = [
        (
            w["id"],
            w["name"],
            w["status"],
            f"{w['progress']['done']}/{w['progress']['total']}",
            str(w["progress"]["cancelled"]),
            w["fit_status"] or "-",
            fmt(w["g_star"]),
            w["created_at"][5:16].replace("T", " "),  # MM-DD HH:MM (UTC)
        )
        for w in sweeps
    ]
    print_listing(SWEEP_COLUMNS, rows)


@app.command()
def watch(sweep_id: Annotated[str, typer.Argument(metavar="ID")], url: UrlOpt = None) -> None:
    """Progress until the sweep ends, on stderr (a bar on a terminal; a line a change into a pipe or a file), then one
    line on stdout, the sweep's end (exit 0 when it succeeded): a script reads that line alone."""
    final = watch_sweep(Client(url), sweep_id)
    out.print(f"{final['id']}: {final['status']}" + (f" ({final['error']})" if final["error"] else ""))
    raise typer.Exit(0 if final["status"] == "succeeded" else 1)


@app.command()
def cancel(sweep_id: Annotated[str, typer.Argument(metavar="ID")], url: UrlOpt = None) -> None:
    """Cancel a sweep: pending trials never start, running ones are stopped."""
    sweep = _api(Client(url).cancel, sweep_id)
    out.print(f"{sweep['id']}: {sweep['status']}")


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
    before = _api(client.sweep, sweep_id)["progress"]["total"]  # extend is refused while the sweep runs: no race
    sweep = _api(client.extend, sweep_id, _ints("--group-sizes", group_sizes), _ints("--seeds", seeds))
    p = sweep["progress"]
    added = p["total"] - before
    out.print(
        f"{sweep['id']}: added {added} trial{'s' * (added != 1)} to the {before} there were; {sweep['status']}, "
        f"{p['done']} of {p['total']} done (the new ones run now)"
    )
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
    left = done.get("mlflow_runs_not_deleted") or []
    out.print(f"{done['id']}: deleted ({done['mlflow_runs_deleted']} MLflow runs moved to the deleted stage)")
    if left:
        _fail(f"{len(left)} MLflow runs of the sweep could not be deleted (see the controller's log): {', '.join(left)}")

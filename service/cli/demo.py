"""`groupscale demo`: start the stack, submit the example sweep over HTTP, show its fit."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from service.cli.app import EXAMPLES, _api, _fail, _read_spec, app, err, out
from service.cli.render import print_fit, watch_sweep
from service.client import Client
from sweeps.verdict import verdict


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
def demo(
    keep: Annotated[bool, typer.Option("--keep", help="leave the stack running for browsing")] = False,
    data_dir: Annotated[
        Path | None, typer.Option(help="the stack's data dir [default: $GROUPSCALE_DATA_DIR or .groupscale]")
    ] = None,
    spec_path: Annotated[Path, typer.Option("--spec")] = EXAMPLES / "arithmetic-tiny.yaml",
) -> None:
    """Start the stack, run the example sweep, print the fit, the recommendation and the MLflow URL."""
    from service.lifetime import interrupt_on_ctrl_c_and_sigterm
    from service.settings import Settings
    from service.stack import StackError, stop_process_group, up_command, wait_until_up

    spec = _read_spec(spec_path)  # a bad spec exits 2 before anything starts
    data_dir = data_dir or Settings().data_dir  # as `up`'s
    interrupt_on_ctrl_c_and_sigterm()  # both end the demo through its `finally`, which stops the stack it started
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
        sweep = _api(client.submit, spec.request())
        err.print(f"submitted sweep {sweep['id']} ({spec.n_trials} trials) over HTTP")
        final = watch_sweep(client, sweep["id"], link_shown=True)  # its link is printed with the answer
        if final["status"] != "succeeded":
            _fail(f"sweep {final['id']} ended {final['status']}: {final['error']}")
        print_fit(_api(client.fit, sweep["id"]))
        out.print(_before_and_after(_api(client.trials, sweep["id"])))
        url = final["mlflow"]["url"]
        note = "" if keep else f"  (the stack stops now; `groupscale up --data-dir {data_dir}` serves it again)"
        out.print(f"MLflow run: {url}{note}", soft_wrap=True)
        rec = _api(client.recommend, spec.task.name, spec.model.label, None)
        out.print(f"recommendation for task={spec.task.name} model={spec.model.label}:")
        out.print(f"[bold]{escape(verdict(rec))}[/bold]", markup=True, highlight=False, soft_wrap=True)
        if keep:
            out.print(
                f"stack left running: API http://127.0.0.1:{port}/docs, MLflow http://127.0.0.1:{mlflow_port}; Ctrl-C stops it"
            )
            proc.wait()
    except KeyboardInterrupt:
        pass
    finally:
        stop_process_group(proc, grace_s=30)


def _before_and_after(trials: list[dict]) -> Table:
    """The held-out accuracy before and after GRPO for each G, the mean over its succeeded trials (the API's trials)."""
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
    return t

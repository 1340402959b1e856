"""How the command line shows a fit and a running sweep (rich tables, a progress bar)."""

from __future__ import annotations

import time

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from service.cli.app import TERMINAL, _api, _fmt, err, out
from service.client import Client


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
            # none: the data do not support a G at all, so no budget's curve recommends one either
            str(b["recommended_group_size"] or "-") if fit.get("evidence") != "none" else "-",
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
    if fit.get("evidence"):
        out.print(f"evidence: [bold]{fit['evidence']}[/bold] ({fit.get('evidence_reason', '')})", highlight=False)
    if fit.get("message"):
        out.print(fit["message"], highlight=False)


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

"""How the command line shows a fit, a running sweep and the stages of a probe or an answer (rich tables, progress
bars)."""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Column, Table

from service.cli.app import TERMINAL, _api, err, out
from service.client import Client
from sweeps.verdict import fmt, verdict


def print_fit(fit: dict) -> None:
    """Human summary of a fit (the JSON shape of sweeps.fit.LawFit)."""
    t = Table(title=f"group-size law fit ({fit['metric']}, {'higher' if fit['maximize'] else 'lower'} is better)")
    for col in ("B", "status", "G*", "a", "b", "c", "R²", "recommended G"):
        t.add_column(col)
    for b in fit["per_budget"]:
        t.add_row(
            str(b["samples_per_step"]),
            b["status"],
            fmt(b["g_star"]),
            fmt(b["a"]),
            fmt(b["b"]),
            fmt(b["c"]),
            fmt(b["r2"]),
            # none: the data do not support a G at all, so no budget's curve recommends one either
            str(b["recommended_group_size"] or "-") if fit.get("evidence") != "none" else "-",
        )
    out.print(t)
    ci = fit.get("g_star_ci95")
    out.print(
        f"status: [bold]{escape(fit['status'])}[/bold]   G* = {fmt(fit['g_star'])}"
        f"   95% CI = {escape('[' + ', '.join(fmt(v) for v in ci) + ']') if ci else '-'}"
        f"   recommended G = [bold]{fit['recommended_group_size'] or '-'}[/bold]",
        markup=True,
    )
    uni = fit.get("universality")
    if uni:
        out.print(f"universality: shared G* = {fmt(uni['shared_g_star'])}; {uni['message']}")
    if fit.get("by_step"):  # the eval checkpoints (eval.every): G* at each T, and whether it moves with T
        at = ", ".join(f"T={s['step']}: {fmt(s['g_star'])}" for s in fit["by_step"])
        time = fit.get("time_universality") or {}
        out.print(f"G* over training time: {at}; {time.get('message', 'no test')}", highlight=False)
    last = verdict(fit)
    if fit.get("evidence"):  # its reason once: the last line gives it when the evidence is not strong
        reason = fit.get("evidence_reason") or ""
        because = f" ({escape(reason)})" if reason not in last else ""
        out.print(f"evidence: [bold]{escape(fit['evidence'])}[/bold]{because}", markup=True, highlight=False)
    print_ending(fit.get("message"), last)


def print_ending(message: str | None, last: str) -> None:
    """What ``message`` adds to the verdict ``last`` (its parts the verdict does not say already), then the verdict."""
    told = [part for part in (message or "").split("; ") if part and part.split(": ", 1)[-1] not in last]
    if told:
        out.print("; ".join(told), highlight=False, soft_wrap=True)
    out.print(f"[bold]{escape(last)}[/bold]", markup=True, highlight=False, soft_wrap=True)


def watch_sweep(client: Client, sweep_id: str, interval_s: float = 1.0, link_shown: bool = False, console: Console = err) -> dict:
    """Progress until the sweep ends; returns the final sweep. On a terminal, a bar on ``console``; elsewhere (a pipe, a
    log file) a line there each time the progress changes: a live bar on no terminal shows nothing until it ends. The
    sweep's MLflow link is printed above once the scheduler has made its parent run (unless ``link_shown``: the caller
    printed it)."""
    sweep = _api(client.sweep, sweep_id)
    columns = (TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    live = console.is_terminal
    last = None
    with Progress(*columns, console=console, disable=not live) as bar:
        task = bar.add_task(sweep["name"], total=sweep["progress"]["total"])
        while True:
            p = sweep["progress"]
            extra = ""
            if p.get("tuning_total") and p["tuning_done"] < p["tuning_total"]:
                extra += f" tuning lr {p['tuning_done']}/{p['tuning_total']}"
            if p.get("g_star_ci95") and None not in p["g_star_ci95"]:
                extra += f" G* in [{p['g_star_ci95'][0]:.3g}, {p['g_star_ci95'][1]:.3g}]"
            if not link_shown and sweep["mlflow"]["url"]:
                console.print(f"MLflow: {sweep['mlflow']['url']}", soft_wrap=True, highlight=False)
                link_shown = True
            described = f"{sweep['name']} [{sweep['status']}] running={p['running']} failed={p['failed']}{extra}"
            completed = p["done"] + p["failed"] + p.get("cancelled", 0)
            bar.update(task, completed=completed, total=p["total"], description=described)
            if not live and (line := f"{described} {completed}/{p['total']}") != last:
                console.print(line, soft_wrap=True, highlight=False, markup=False)
                last = line
            if sweep["status"] in TERMINAL:
                return sweep
            time.sleep(interval_s)
            sweep = _api(client.sweep, sweep_id)


class Stages:
    """The stages of a running probe or answer (workers.progress reports, or a job's ``progress`` from the API): a
    line on stderr as each stage starts, kept in the terminal and in logs ("model: building the model preset ..."),
    and below them a live bar of the current stage: where it stands, done of total, its time so far.

    Use: ``with Stages(title) as stages: ... stages.show(progress)``, from one thread."""

    def __init__(self, title: str) -> None:
        self.title = title
        self._bar = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}", markup=False, table_column=Column(no_wrap=True, overflow="ellipsis", ratio=1)),
            BarColumn(bar_width=20),
            MofNCompleteColumn(),
            TextColumn("{task.fields[unit]}", markup=False),
            TimeElapsedColumn(),
            console=err,
            transient=True,  # the stage lines stay; the bar goes when the job ends
        )
        self._task: Any = None
        self._seen: list[dict] = []  # the stages shown so far: {stage, label}

    def __enter__(self) -> Stages:
        self._bar.start()
        self._task = self._bar.add_task(self.title, total=None, unit="")
        return self

    def __exit__(self, *exc: object) -> None:
        self._bar.stop()

    def show(self, progress: dict | None) -> None:
        """Show a report ({stage, label, done, total, unit, detail}, and from the API the ``stages`` it went through)."""
        if not progress:
            return
        stages = progress.get("stages") or [*self._seen, {"stage": progress["stage"], "label": progress["label"]}]
        fresh = [s for s in stages[len(self._seen) :] if not self._seen or s["stage"] != self._seen[-1]["stage"]]
        for stage in fresh:
            self._bar.console.print(f"{stage['stage']}: {stage['label']}", highlight=False, markup=False, soft_wrap=True)
            self._bar.reset(self._task)  # the elapsed time is the stage's own
        self._seen += fresh
        detail = progress.get("detail") or ""
        described = f"{self.title} {progress['stage']}" + (f": {detail}" if detail else "")
        done, total, unit = progress.get("done") or 0, progress.get("total"), progress.get("unit") or ""
        self._bar.update(self._task, description=described, completed=done, total=total, unit=unit)


def print_per_prompt(block: dict | None) -> None:
    """One line of what per-prompt G would save (a probe's or an answer's ``per_prompt``) and the pass-rate table."""
    if not block:
        return
    if block.get("mse_ratio") is None:
        out.print(f"per-prompt G: not estimated ({block.get('reason', 'no ratio')})", highlight=False)
        return
    ci = lambda key: "[{}, {}]".format(*map(fmt, block.get(key) or [None, None]))  # noqa: E731
    table = ", ".join(
        f"{b['pass_rate'][0]:g}-{b['pass_rate'][1]:g}: G {b['group_size']} ({b['share']:.0%})" for b in block["buckets"]
    )
    out.print(
        f"per-prompt G (gradient MSE over the best uniform G's): by pass rate [{table}] x {fmt(block['bucket_mse_ratio'])} "
        f"(95% CI {ci('bucket_mse_ratio_ci95')}); each prompt its own G x {fmt(block['mse_ratio'])} (95% CI "
        f"{ci('mse_ratio_ci95')}); sGPO's G = s/p x {fmt(block['sgpo_mse_ratio'])}. {block['message']}",
        highlight=False,
        soft_wrap=False,
    )


def print_where(where: dict | None) -> None:
    """Where a probe's or an answer's MLflow run is (its result's ``mlflow``: service.tracking.Tracking.log_probe)."""
    if where:
        run = where["url"] or f"run {where['run_id']}"
        out.print(f"MLflow: {run} (experiment {where['experiment']})", highlight=False, soft_wrap=True)


def print_answer(answer: dict) -> None:
    """Human summary of `groupscale answer` (sweeps.answer.Answer's JSON); its last line is the answer in words."""
    out.print(f"method: {answer.get('method', 'staged')}", highlight=False)
    for piece in answer.get("interval_pieces") or []:
        lo, hi = piece["ci95"]
        span = f"[{fmt(lo)}, {fmt(hi)}]" if hi is not None else f"at least {fmt(lo)} (open above)"
        out.print(f"  {piece['source']}: G* {'in ' if hi is not None else ''}{span}", highlight=False)
    metric = (answer.get("stages") or {}).get("first_rung_fit", {}) or {}
    unit = metric.get("metric", "metric")
    for key, name in (("regret_g8", "TRL's default G"), ("regret_passrate", "the pass-rate rule's G")):
        r = answer.get(key)
        if r and r.get("value") is None and r.get("reason"):
            out.print(f"regret of {name} = {r['group_size']}: not measured ({r['reason']})", highlight=False)
        elif r and r.get("value") is not None:
            ci = r.get("ci95") or [None, None]
            out.print(
                f"regret of {name} = {r['group_size']} against G = {r['versus']}: {fmt(r['value'])} {unit} "
                f"(95% CI [{fmt(ci[0])}, {fmt(ci[1])}])",
                highlight=False,
            )
    if answer.get("baseline"):  # the user's own G: keep it or move
        out.print(f"your G: {answer['baseline']['reason']}", highlight=False, soft_wrap=True)
    print_per_prompt(answer.get("per_prompt"))
    cost = answer["cost"]
    share = f" ({cost['fraction_of_grid']:.2%} of the grid's {cost['grid_completions']})" if cost.get("fraction_of_grid") else ""
    in_time = f"{cost['seconds']:.1f} s"
    if cost.get("probe_seconds") is not None:
        in_time += f" (the probe {cost['probe_seconds']:.1f} s)"
    if cost.get("fraction_of_grid_seconds") is not None:
        in_time += f", {cost['fraction_of_grid_seconds']:.2%} of the grid's {cost['grid_seconds']:.0f} s at its own step times"
    out.print(f"cost: {cost['completions']} sampled completions{share}, {in_time}", highlight=False)
    for stage, why in ((answer.get("stages") or {}).get("plan", {}).get("skipped") or {}).items():
        out.print(f"not run: {stage}: {why}", highlight=False)
    print_where(answer.get("mlflow"))
    # whole: `| tail -1` reads it
    out.print(f"[bold]{escape(answer['message'])}[/bold]", markup=True, highlight=False, soft_wrap=True)

"""The commands that read answers over HTTP: fit, trials, compare, report, recommend, probe and answer (also --local)."""

from __future__ import annotations

import time
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from service.cli.app import TERMINAL, JsonOpt, UrlOpt, _api, _fail, _print_json, _read_spec, app, err, out
from service.cli.render import Stages, print_answer, print_ending, print_fit, print_per_prompt, print_where
from service.cli.tables import Col, print_listing
from service.client import Client
from sweeps.exports import EXPORTS, ExportError, get_export
from sweeps.finite import finite_or_none
from sweeps.verdict import fmt, verdict


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
        from sweeps.fit import LawFit  # scipy and matplotlib: only when a plot is asked for
        from sweeps.plots import plot_fit

        try:
            plot_fit(LawFit.model_validate(doc), title=sweep_id).savefig(plot, format="png")
        except OSError as e:
            _fail(f"--plot: cannot write {plot}: {e.strerror or e}", 2)
        err.print(f"plot written to {plot}")


@app.command()
def trials(sweep_id: Annotated[str, typer.Argument(metavar="ID")], url: UrlOpt = None, as_json: JsonOpt = False) -> None:
    """A sweep's trials: G, B, seed, status, the final metric and the MLflow run."""
    rows = _api(Client(url).trials, sweep_id)
    if as_json:
        return _print_json(rows)
    metric = "grad_mse" if any("grad_mse" in (r.get("metrics") or {}) for r in rows) else "gap"  # the sweep's measure
    cols = (*(Col(c, justify="right") for c in ("G", "B", "seed")), Col("status"), Col(metric, rank=1, justify="right"))
    cells = [
        (str(r["group_size"]), str(r["samples_per_step"]), str(r["seed"]), r["status"])
        + (fmt((r.get("metrics") or {}).get(metric), 4), str(r["attempts"]), r.get("mlflow_run_id") or "-")
        for r in rows
    ]
    out.print(f"trials of {sweep_id}", highlight=False)
    print_listing((*cols, Col("tries", rank=2, justify="right"), Col("MLflow run")), cells)
    for r in rows:  # below the table, whole: a reason is prose, wrapped at word ends
        if r.get("reason"):
            where = f"G={r['group_size']} B={r['samples_per_step']} seed={r['seed']}"
            out.print(f"{where} {r['status']}: {r['reason']}", highlight=False)


@app.command()
def compare(
    first: Annotated[str, typer.Argument(metavar="ID1")],
    second: Annotated[str, typer.Argument(metavar="ID2")],
    url: UrlOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Two sweeps' fits side by side: G*, intervals, evidence, and whether the intervals overlap. Sweeps of different
    tasks, models or measures are compared all the same, with a warning that names what differs."""
    client = Client(url)
    specs = {sid: _api(client.sweep, sid)["spec"] for sid in (first, second)}
    fits = {sid: _api(client.fit, sid) for sid in (first, second)}
    differ = [k for k in ("task", "model", "measure") if specs[first].get(k) != specs[second].get(k)]
    a, b = (fits[first].get("g_star_ci95"), fits[second].get("g_star_ci95"))
    closed = all(ci and None not in ci for ci in (a, b))
    overlap = bool(closed and a[0] <= b[1] and b[0] <= a[1])
    verdict = (
        ("the G* intervals overlap: the data do not tell the two G* apart" if overlap else "the G* intervals do not overlap")
        if closed
        else "no comparison of intervals: a fit has no closed interval (see its status)"
    )
    if differ:
        verdict = (
            f"warning: the sweeps differ in {' and '.join(differ)} ({_what(specs[first], differ)} vs "
            f"{_what(specs[second], differ)}), so their G* answer different questions; " + verdict
        )
    if as_json:
        return _print_json(
            {"fits": fits, "intervals_overlap": overlap if closed else None, "differ_in": differ, "message": verdict}
        )
    t = Table()
    for col in ("sweep", "status", "G*", "95% CI", "use G", "evidence"):
        t.add_column(col)
    for sid, f in fits.items():
        ci = f.get("g_star_ci95")
        t.add_row(
            sid,
            f["status"],
            fmt(f.get("g_star")),
            "[" + ", ".join(fmt(v) for v in ci) + "]" if ci else "-",
            str(f.get("recommended_group_size") or "-"),
            str(f.get("evidence") or "-"),
        )
    out.print(t)
    out.print(verdict, highlight=False)


def _what(spec: dict, keys: list[str]) -> str:
    """A short name of a spec's ``keys`` (task, model, measure): "arithmetic, tiny-llama"."""
    from sweeps.spec import ModelSpec

    names = {
        "task": spec["task"].get("name", "?"),
        "model": ModelSpec.model_validate(spec["model"]).label,
        "measure": (spec.get("measure") or {}).get("kind", "outcome"),
    }
    return ", ".join(str(names[k]) for k in keys)


@app.command()
def report(
    sweep_id: Annotated[str, typer.Argument(metavar="ID")],
    out_path: Annotated[Path, typer.Option("--out", help="the HTML file to write")] = Path("report.html"),
    probe: Annotated[str | None, typer.Option(help="a probe's id: its G* is set beside the sweep's")] = None,
    answer: Annotated[str | None, typer.Option(help="an answer id (groupscale answer): its G beside the sweep's")] = None,
    url: UrlOpt = None,
) -> None:
    """Write a sweep's report: one self-contained HTML file (plots inlined) to read or send."""
    from sweeps.fit import LawFit  # scipy and matplotlib: only for this command
    from sweeps.report import render_report

    client = Client(url)
    sweep, fit = _api(client.sweep, sweep_id), _api(client.fit, sweep_id, answer)  # the fit's verdict cites that answer
    probe_result = _api(client.get_probe, probe).get("result") if probe else None
    answer_result = _api(client.get_answer, answer).get("result") if answer else None
    title = f"{sweep['name']} ({sweep_id})"
    about = {"spec": sweep["spec"], "created": sweep["created_at"], "trials": _api(client.trials, sweep_id)}
    html = render_report(LawFit.model_validate(fit), title, probe_result, answer_result, **about)
    out_path.write_text(html)
    out.print(f"report written to {out_path}")


def _print_recommendation(rec: dict) -> None:
    """A recommendation in words: where it comes from, what its message adds, and last the answer (verdict)."""
    last = verdict(rec)
    out.print(f"from sweep {rec['sweep_id']} (fit {rec['status']}), task {rec['task_key']}, model {rec['model_key']}:")
    print_ending(rec.get("message"), last)


RecommendFormat = StrEnum("RecommendFormat", {name: name for name in ("text", "json", *EXPORTS)})  # sweeps.exports


@app.command()
def recommend(
    task: Annotated[str, typer.Option(help="a sweep's task_key (arithmetic, my-math:1f2e...), or a dataset's label")],
    model: Annotated[str, typer.Option(help="a sweep's model_key, a preset name, or a model folder's path")],
    samples_per_step: Annotated[int | None, typer.Option(min=2, help="your budget B")] = None,
    form: Annotated[
        RecommendFormat,
        typer.Option("--format", help="text; json; " + "; ".join(f"{e.name}: {e.help}" for e in EXPORTS.values())),
    ] = RecommendFormat.text,
    num_processes: Annotated[
        int, typer.Option(min=1, help="--format trl: the processes your run trains on (the batch settings give B there)")
    ] = 1,
    config: Annotated[
        Path | None,
        typer.Option(
            help="your trainer's config or run script (the --format trainer's): printed back with the measured G, "
            "only G and the keys tied to it at the file's B changed"
        ),
    ] = None,  # fmt: skip
    drop: Annotated[
        list[str] | None, typer.Option(help="with --config: a setting of the file the sweep trained without (spec from-* --drop)")
    ] = None,
    url: UrlOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Which G to use for a task and model (from the finished sweeps), in groupscale's terms or as another trainer's
    settings.

    Exit 1 when the best fit recommends no G, in every format: text ends on the reason, json prints the document,
    the trainers' formats print nothing on stdout (it is a config) and the reason on stderr."""
    client = Client(url)
    if config is not None:
        return _recommend_into(client, config, form.value, task, model, samples_per_step, tuple(drop or ()))
    rec = _api(client.recommend, task, model, samples_per_step)
    g = rec["recommended_group_size"]
    form = RecommendFormat.json if as_json else form
    if form in (RecommendFormat.text, RecommendFormat.json):
        _print_json(rec) if form is RecommendFormat.json else _print_recommendation(rec)
        raise typer.Exit(0 if g is not None else 1)
    if g is None:
        _fail(verdict(rec))  # stdout is a config file: nothing goes there
    from sweeps.engines import get_engine
    from sweeps.spec import SweepSpec

    spec = SweepSpec.model_validate(_api(client.sweep, rec["sweep_id"])["spec"])
    if spec.tokens_per_step is not None:  # an export fixes completions a step; the sweep fixed tokens
        _fail(
            f"the sweep trained a budget of {spec.tokens_per_step} completion tokens a step (tokens_per_step), which "
            f"{form} settings cannot express (they fix completions a step): use G = {g} with {spec.tokens_per_step} / "
            "(G x your mean completion length) prompts a step"
        )
    budget = samples_per_step or max(b for b in spec.samples_per_step if b % g == 0)
    head = f"groupscale: G = {g} at B = {budget} (G* = {fmt(rec['g_star'])}, evidence {rec['evidence']}), sweep {rec['sweep_id']}"
    try:  # the objective the sweep trained (an engine-trl sweep's recipe, not groupscale's defaults)
        recipe = get_engine(spec.engine).recipe(spec)
        typer.echo(get_export(form).render(g, budget, recipe, head, num_processes), nl=False)
    except ExportError as e:
        _fail(f"{e.option}: {e}", 2) if e.option else _fail(f"the sweep has no {form} equivalent: {e}")


def _recommend_into(
    client: Client, path: Path, form: str, task: str, model: str, samples_per_step: int | None, drop: tuple[str, ...]
) -> None:
    """``recommend --config FILE --format NAME``: the user's file with the recommended G at its own B (exit 2 for a
    file or format that does not fit, 1 when there is no G or the sweep measured another objective)."""
    from sweeps.engines import get_engine
    from sweeps.exports.base import recipe_grpo
    from sweeps.frameworks import FRAMEWORKS, Refused
    from sweeps.frameworks.editing import ObjectiveDiffers, edit_config, file_budget
    from sweeps.spec import SweepSpec

    if form not in FRAMEWORKS:
        _fail(f"--format: {form!r} with --config; allowed: {', '.join(FRAMEWORKS)} (the trainer of the file)", 2)
    framework = FRAMEWORKS[form]
    try:
        budget = file_budget(framework, path, tuple(f"{key}=null" for key in drop))
    except ValueError as e:
        _fail(f"--config: {path}: {e}", 2)
    if samples_per_step not in (None, budget.samples_per_step):
        _fail(f"--samples-per-step: {samples_per_step}, but {path} trains B = {budget.samples_per_step}; give one of them", 2)
    rec = _api(client.recommend, task, model, budget.samples_per_step)
    g = rec["recommended_group_size"]
    if g is None:
        _fail(verdict(rec))
    spec = SweepSpec.model_validate(_api(client.sweep, rec["sweep_id"])["spec"])
    try:
        text = edit_config(framework, path, g, recipe_grpo(get_engine(spec.engine).recipe(spec)), budget)
    except ObjectiveDiffers as e:
        _fail(str(e))
    except Refused as e:
        _fail(f"{framework.title} cannot take G = {g} at B = {budget.samples_per_step} as the file sets it: {e}")
    err.print(
        f"groupscale: G = {g} at B = {budget.samples_per_step} (G* = {fmt(rec['g_star'])}, evidence {rec['evidence']}), "
        f"sweep {rec['sweep_id']}: {path} with {', '.join(framework.tied)} changed", highlight=False, soft_wrap=True,
    )  # fmt: skip
    typer.echo(text, nl=False)


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
        from sweeps.trial import TrialConfig
        from workers.entry import run_probe_task

        cfg = TrialConfig.first_of(spec, get_settings().model_cache_dir)
        result = _here("probe", lambda show: run_probe_task(cfg.to_dict(), spec.probe.model_dump(), report=show))
    else:
        client = Client(url)
        job = _api(client.probe, spec.request())
        label = f"{spec.probe.prompts} prompts x {spec.probe.completions} completions"
        result = _wait_for(client.get_probe, job, f"probe {job['id']}: {label}")
    if as_json:
        return _print_json(finite_or_none(result))
    ci = result["g_star_ci95"]
    out.print(
        f"tau2 = {fmt(result['tau2'])}, sigma2 = {fmt(result['sigma2'])}, kappa = {fmt(result['kappa'])}"
        f"  ->  G* = [bold]{fmt(result['g_star'])}[/bold], 95% CI {escape(f'[{fmt(ci[0])}, {fmt(ci[1])}]')}"
        f"  ({result['samples']} samples, {result['seconds']:.1f} s)",
        markup=True,
    )
    if "exact" in result:
        ex = result["exact"]
        out.print(
            f"exact: tau2 = {fmt(ex['tau2'])}, sigma2 = {fmt(ex['sigma2'])}, kappa = {fmt(ex['kappa'])}, G* = {fmt(ex['g_star'])}"
        )
    print_per_prompt(result.get("per_prompt"))
    print_where(result.get("mlflow"))
    out.print(result["message"], highlight=False)


def _here(stage: str, run: Callable[[Callable], dict]) -> dict:
    """``run(report)`` in this process, its stages shown (render.Stages); a model or data file that cannot be used is
    bad input (exit 2)."""
    try:
        with Stages(stage) as stages:
            return run(stages.show)
    except (ValueError, OSError) as e:
        _fail(f"{type(e).__name__}: {(str(e).splitlines() or [''])[0]}", 2)


def _wait_for(get: Callable[[str], dict], job: dict, label: str) -> dict:
    """Poll a probe or answer job until it ends, showing its stages as it reports them (render.Stages: what it
    builds, the probe, the pilot, the halving); its result, or exit 1 with its error."""
    err.print(label, highlight=False, soft_wrap=True)
    with Stages(label.split(":")[0]) as stages:
        while job["status"] not in TERMINAL:
            time.sleep(1)
            job = _api(get, job["id"])
            stages.show(job.get("progress"))
    if job["status"] != "succeeded":
        _fail(f"{label.split(':')[0]} {job['status']}: {job['error']}")
    return job["result"]


@app.command()
def answer(
    spec_path: Annotated[Path, typer.Argument(metavar="SPEC.yaml", help="the sweep you would run: task, model, G and B grid")],
    budget: Annotated[
        int | None,
        typer.Option("--budget", min=1, help="sampled completions it may spend (default: answer.budget, else 1% of the grid)"),
    ] = None,
    local: Annotated[bool, typer.Option("--local", help="run here instead of on the controller's Ray cluster")] = False,
    url: UrlOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Which G, for a fraction of the grid's cost: a probe, a pilot trial and a halving sweep (answer.method: sweeps.answer)."""
    from service.preflight import SpecError, preflight_answer

    spec = _read_spec(spec_path)
    if budget is not None:
        spec = spec.model_copy(update={"answer": spec.answer.model_copy(update={"budget": budget})})
    try:
        plan = preflight_answer(spec)
    except SpecError as e:
        _fail(f"{'.'.join(map(str, e.loc))}: {e.msg}", 2)
    if local:
        from service.settings import get_settings
        from workers.entry import run_answer_task

        result = _here(
            "answer", lambda show: run_answer_task(spec.model_dump(mode="json"), str(get_settings().model_cache_dir), show)
        )
    else:
        client = Client(url)
        job = _api(client.answer, spec.request())
        result = _wait_for(client.get_answer, job, f"answer {job['id']}: at most {plan.budget} completions")
        if not as_json:
            err.print(
                f"answer {job['id']} (set it beside a sweep: groupscale report SWEEP_ID --answer {job['id']})", soft_wrap=True
            )
    if as_json:
        return _print_json(finite_or_none(result))
    print_answer(result)

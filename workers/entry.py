"""The workers' side as the controller and the CLI reach it, and the only module of workers/ they import: what Ray
runs (trials on TrialWorker actors, probes, answers, lr tunings, the checks at submit) and the worker code the
controller runs in its own process (reading a task's data, its reward files' names, the MLflow client the trials log
with, a preset's folder).

Torch-free at import: each task imports the trainer, the probe or a model when it runs.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from sweeps.trial import TrialConfig
from workers.data import DatasetError, check_rows, content_digest, load_rows, read_prompt_answer_lines  # noqa: F401
from workers.measures import run_measure  # noqa: F401 - for benchmarks and tests, as Ray runs it
from workers.progress import Report, say
from workers.rewards import math_verify_available  # noqa: F401
from workers.rewards.loading import answer_paths  # noqa: F401
from workers.rewards.process import needs_process  # noqa: F401
from workers.rewards.terms import term_names  # noqa: F401 - a reward term's metric key (reward/<key>)
from workers.tracking import RetryingClient  # noqa: F401 - the MLflow client both sides log with
from workers.tune_lr import frozen_trials  # noqa: F401
from workers.worker import TrialWorker, run_trial, worker_starts  # noqa: F401


def model_config_error(folder: str | Path) -> str | None:
    """Why transformers cannot load the model folder's config.json, in one line (None: it loads; no code of the
    folder's is run)."""
    try:
        from transformers import AutoConfig  # only for a model folder: transformers takes a second to import

        AutoConfig.from_pretrained(folder, local_files_only=True, trust_remote_code=False)
    except Exception as e:  # noqa: BLE001 - any load failure is bad input, reported in one line
        return f"{type(e).__name__}: {(str(e).splitlines() or [''])[0][:300]}"
    return None


def build_preset(preset: str, task: str, cache_dir: str | Path) -> Path:
    """The folder of a built-in language-model preset warm-started on built-in ``task`` (built on first use, cached
    under ``cache_dir``): what ``groupscale models export`` copies."""
    from workers.models.presets import preset_path
    from workers.tasks import make_task

    return preset_path(preset, make_task({"name": task}), Path(cache_dir))


def run_probe_task(config: dict[str, Any], probe: dict[str, Any], report: Report | None = None) -> dict[str, Any]:
    """Run the variance-component probe (workers.probe) for a spec's task and model; ``report`` hears its stages (the
    data, a model preset built on first use, the probe: workers.progress)."""
    from sweeps.spec import ProbeSpec
    from workers.batch import prepare
    from workers.probe import run_probe

    p, cfg = ProbeSpec.model_validate(probe), TrialConfig(**config)
    prepare(cfg, report)
    say(report, "probe", f"{p.prompts} prompts x {p.completions} completions ({p.prompts * p.completions} samples)")
    return run_probe(cfg, p)


def run_answer_task(spec: dict[str, Any], cache_dir: str, report: Report | None = None) -> dict[str, Any]:
    """Run `groupscale answer` (workers.answers: the spec's answer.method, within its ``answer.budget`` or the default
    share of its grid); the Answer as JSON. ``report`` hears its stages (workers.progress)."""
    from sweeps.spec import SweepSpec
    from workers.answers import run_answer

    return run_answer(SweepSpec.model_validate(spec), cache_dir, report=report).model_dump(mode="json")


def check_trl_task(spec: dict[str, Any], cache_dir: str) -> dict[str, Any] | None:
    """engine trl: build the recipe's GRPOConfig for the sweep's first trial and look for the packages it names,
    where trials run (a Ray worker), at submit: what would fail every trial is refused before any is scheduled.

    Returns:
        None when the recipe builds here; else ``{"field": name or None, "message": ...}``
        (workers.engines.trl.recipe_refusal).
    """
    from sweeps.spec import SweepSpec
    from workers.engines.trl import recipe_refusal

    parsed = SweepSpec.model_validate(spec)
    cfg = TrialConfig.first_of(parsed, cache_dir)
    refusal = recipe_refusal(cfg, len(parsed.task.rewards) if parsed.task.name == "dataset" else 1)
    return None if refusal is None else {"field": refusal[0], "message": refusal[1]}


PLACEHOLDER_COMPLETION = "The answer is \\boxed{0}. #### 0"  # what the reward check scores (the common answer formats)


def check_rewards_task(task: dict[str, Any], timeout_s: float, max_steps: int = 1) -> dict[str, Any] | None:
    """Import a dataset task's reward functions and call each on the first two rows of its data and the first of each
    other ``data_source`` (checked_indices) with placeholder completions, then with completions that hold each row's
    reference answer (workers.rewards.reference: a built-in or verl scorer must score one positively; a TRL-convention
    function is not tried, as which column holds its answer is not known), in a reward process
    (workers.rewards.process), as a trial would: run at submit on a Ray worker, where user code may run.

    Args:
        task: the DatasetTaskSpec's fields.
        timeout_s: how long the loading and the calls may take together.
        max_steps: the trials' T, for ``trainer_state`` (the check is a trial's first batch: global_step 0).
    Returns:
        ``{"conventions": [each term's convention]}`` (what ``convention: auto`` took) when every reward loads and
        returns one number (or None) per completion and scores a reference; else ``{"index": i or None, "message": ...,
        "with": the completions it was called with}`` naming the reward and the
        cause (an import error with the pip command of a missing package and the row that reached it, a factory's
        error, a wrong signature, a wrong return shape, no reference scored, a timeout).
    """
    from workers.data import is_conversational
    from workers.rewards import RewardError, TrainerState, trl_kwargs
    from workers.rewards.process import RewardProcess, RewardTimeout
    from workers.rewards.reference import PLACEHOLDER_IDS

    start = time.monotonic()
    try:
        data = load_rows(task["path"], task.get("split"))
    except DatasetError as e:
        return {"index": None, "message": f"the Ray workers cannot read the data: {e}"}
    at = checked_indices(data)
    rows, column, state = [data[i] for i in at], task.get("prompt_column") or "prompt", TrainerState(0, max_steps)
    prompts = [row[column] for row in rows]
    kwargs = trl_kwargs(
        prompts,
        [PLACEHOLDER_COMPLETION] * len(rows),
        [PLACEHOLDER_IDS] * len(rows),
        [{k: v for k, v in row.items() if k != column} for row in rows],
        is_conversational(prompts[0]),
        state,
    )
    called, conventions = "placeholder completions", []
    try:
        process = RewardProcess(task["rewards"], timeout_s=timeout_s)
        conventions = process.conventions
        try:
            failure = process.check(kwargs, len(rows), max(1.0, timeout_s - (time.monotonic() - start)), at)
            if failure is None:
                called = "completions that hold each row's reference answer in the common answer formats"
                failure = process.references(rows, column, state, max(1.0, timeout_s - (time.monotonic() - start)))
        finally:
            process.close()
    except RewardTimeout:
        failure = RewardError(f"the reward functions were not loaded and called on {len(rows)} rows within {timeout_s:g} s")
    except RewardError as e:
        failure = e
    if failure is None:
        return {"conventions": conventions}
    return {"index": failure.index, "message": str(failure), "with": called}


def check_answers_here(rewards: list[dict[str, Any]], rows: list[dict[str, Any]], prompt_column: str) -> dict[str, Any] | None:
    """The checks of the reference answers that the controller runs itself, on the built-ins that run anywhere (our
    code: exact_match, numeric_match; math_verify and users' functions are checked on the cluster, check_rewards_task):
    numeric_match reads the references sampled over the whole file as numbers (workers.rewards.reference
    .unreadable_numbers), and each scores the checked rows' reference answers (reference_failure).

    Returns:
        None, or ``{"index": i, "message": ...}`` (the message shows no data but the first reference's short repr).
    """
    from workers.rewards.loading import build_terms
    from workers.rewards.reference import reference_failure, unreadable_numbers

    here = [(i, r) for i, r in enumerate(rewards) if r.get("name") and not needs_process([r])]
    for i, r in here:
        column = r.get("answer_column") or "answer"
        if r["name"] == "numeric_match" and (found := unreadable_numbers(rows, column))[0]:
            return {
                "index": i,
                "message": f"numeric_match reads each reference answer as one number or fraction, and {found[0]} of the "
                f"{found[1]} references sampled over the file in {column!r} are not (the first: row {found[2]}); "
                "use math_verify for MATH-style answers (roots, pi, intervals, expressions)",
            }
    checked = [rows[k] for k in checked_indices(rows)]
    entries = [r for _, r in here]
    failure = reference_failure(build_terms(entries), entries, checked, prompt_column, [i for i, _ in here])
    return None if failure is None else {"index": failure.index, "message": str(failure)}


CHECKED_SOURCES = 16  # the reward check reads the first row of at most this many data_source values


def checked_indices(rows: list[dict[str, Any]]) -> list[int]:
    """The rows the reward check scores: the first two, and the first row of each other ``data_source`` (verl's
    column: a dispatcher scores each source with its own scorer, whose imports the first rows may never reach)."""
    picked, sources = list(range(min(2, len(rows)))), {row.get("data_source") for row in rows[:2]}
    for i in range(2, len(rows)):
        if len(sources) >= CHECKED_SOURCES + 2:
            break
        if rows[i].get("data_source") not in sources:
            sources.add(rows[i].get("data_source"))
            picked.append(i)
    return picked


def run_tune_lr(
    config: dict[str, Any],
    tune: dict[str, Any],
    tracking_uri: str | None = None,
    experiment_id: str | None = None,
    parent_run_id: str | None = None,
) -> dict[str, Any]:
    """The learning-rate tuning phase at one (G, B): workers.tune_lr.tune_learning_rate, each lr trial an MLflow run.

    Args:
        config: TrialConfig fields of the sweep's trial at this (G, B) (lr, steps and checkpoints are replaced).
        tune: ``{low, high, trials, steps}`` (TuneLRSpec; steps None: config steps // 4), optional ``seed``
            (TPE sampler, default 0), ``metric`` (default: the law's metric, gap) and ``report_every``.
        tracking_uri, experiment_id, parent_run_id: when all given, every lr trial is a child run of the
            sweep's parent run (workers.tracking.TuneRuns), ended FINISHED, KILLED (pruned) or FAILED.
    Returns:
        tune_learning_rate's plain result, each trial with its ``run_id`` (None without tracking), and ``seconds``.
    """
    from workers.tune_lr import tune_learning_rate

    start = time.perf_counter()
    cfg = TrialConfig(**config)
    runs = None
    if tracking_uri and experiment_id and parent_run_id:
        from workers.tracking import TuneRuns

        params = {
            "task": cfg.task.get("name"),
            "model": cfg.model.get("preset") or cfg.model.get("path"),
            "seed": cfg.seed,
            "optimizer": cfg.grpo.optimizer,
            "tune_lr.low": tune["low"],
            "tune_lr.high": tune["high"],
            "tune_lr.trials": tune["trials"],
        }
        runs = TuneRuns(tracking_uri, experiment_id, parent_run_id, cfg.group_size, cfg.samples_per_step, params)
    try:
        result = tune_learning_rate(
            cfg,
            float(tune["low"]),
            float(tune["high"]),
            int(tune["trials"]),
            int(tune.get("steps") or max(1, cfg.steps // 4)),
            seed=int(tune.get("seed", 0)),
            make_report=runs.start if runs else None,
            metric=tune.get("metric"),
            report_every=tune.get("report_every"),
            on_trial_end=runs.end if runs else None,
        )
    except BaseException as e:  # an error: FAILED; cancelled (KeyboardInterrupt, Ray's cancellation): KILLED
        if runs is not None:
            runs.abort("FAILED" if isinstance(e, Exception) else "KILLED")
        raise
    for t in result["trials"]:
        t["run_id"] = runs.run_ids.get(t["number"]) if runs else None
    return {**result, "seconds": time.perf_counter() - start}

"""Every MLflow call the controller makes: experiments, parent and child runs, the fit.

One parent run per sweep; one child run per trial (tag mlflow.parentRunId, never a global
active run). The controller creates and ends sweep, trial and probe runs so that none is left RUNNING (lr-search
runs are made and ended by the workers, workers.tracking.TuneRuns). Every call retries
transient failures (tracking server down, 5xx) with backoff for a bounded time (workers.tracking).
"""

from __future__ import annotations

import json
import logging
import time
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

import httpx
from mlflow.entities import Dataset, DatasetInput, InputTag, Metric, Param, RunStatus, RunTag

from service.identity import short_digest, task_key
from service.lifecycle import TrialStatus
from service.store import outside_transaction
from sweeps.answer import Answer
from sweeps.engines import get_engine
from sweeps.fit import LawFit
from sweeps.planner import prompts_per_step
from sweeps.plots import plot_fit, plot_g_star_over_time
from sweeps.report import render_report
from sweeps.spec import SweepSpec
from workers.entry import RetryingClient

if TYPE_CHECKING:
    from sweeps.adaptive import Point

log = logging.getLogger("groupscale.tracking")

# The experiment type MLflow 3.0-3.16's UI read to pick its view; 3.17's picks it in the browser (service.mlflow_app),
# and the tag only says what the experiment holds (model training runs, no GenAI traces).
EXPERIMENT_TAGS = {"mlflow.experimentKind": "custom_model_development"}
TRIAL_RUN_STATUS = {
    TrialStatus.SUCCEEDED: "FINISHED",
    TrialStatus.NO_SIGNAL: "FINISHED",
    TrialStatus.FAILED: "FAILED",
    TrialStatus.CANCELLED: "KILLED",
}  # a trial's final status -> its MLflow run's


def _spec_params(spec: SweepSpec) -> dict:
    """Parameters every run of a spec carries (task, model, T, measure, tokens_per_step when set, the processes of each
    trial as ``world_size``, and groupscale's GRPO settings; an engine-trl trial's run gets TRL's, as TRL ran them,
    from its worker: workers.engines.trl.trained_settings)."""
    own = get_engine(spec.engine).run_params(spec)
    about = {"task": spec.task.name, "model": spec.model.label, "steps": spec.steps, "measure": spec.measure.kind}
    tokens = {} if spec.tokens_per_step is None else {"tokens_per_step": spec.tokens_per_step}
    return {**about, **tokens, "world_size": spec.resources.num_processes, **own}


def experiment_name(key: str, kind: str | None = None) -> str:
    """The MLflow experiment of a task (``key``: its task_key, service.identity): ``groupscale/<key>``, which holds the
    sweeps and probes; ``groupscale/<key>/<kind>`` for the runs of a kind kept apart (``answers``: the cheap answers,
    which are no sweep's)."""
    return f"groupscale/{key}" + (f"/{kind}" if kind else "")


def redact(uri: str) -> str:
    """``uri`` without a password (``http://user:***@host``): the form shown in answers and logs."""
    parts = urlsplit(uri)
    if parts.password is None:
        return uri
    host = parts.hostname or ""
    netloc = f"{parts.username}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


ML_VIEW = "workflowType=machine_learning"  # MLflow UI's query parameter that picks the model-training view


class Tracking:
    def __init__(self, tracking_uri: str) -> None:
        self.uri = tracking_uri.rstrip("/")  # with credentials, for clients (the workers' too)
        self.public_uri = redact(self.uri)  # for answers and logs
        self.client = RetryingClient(tracking_uri)  # transient failures retried with backoff, bounded

    def run_url(self, experiment_id: str | None, run_id: str | None) -> str | None:
        """The run's page in MLflow's UI, in the model-training view (runs, metrics, charts): MLflow 3 opens an
        experiment in its GenAI view (traces) unless the link asks otherwise, whatever the experiment's tags."""
        if not (experiment_id and run_id and self.uri.startswith("http")):
            return None
        return f"{self.public_uri}/#/experiments/{experiment_id}/runs/{run_id}?{ML_VIEW}"

    def _experiment(self, name: str) -> tuple[str, str | None]:
        """The experiment ``name`` (experiment_name), created on first use, tagged as model development
        (EXPERIMENT_TAGS; the MLflow server `up` starts opens it on its runs table, service.mlflow_app); and a note when
        it was in MLflow's trash and has been restored (MLflow refuses a new experiment of a deleted one's name).

        Raises:
            RuntimeError: it is deleted and MLflow refused to restore it (naming it and what to do).
        """
        exp = self.client.get_experiment_by_name(name)
        if exp is None:
            return self.client.create_experiment(name, tags=EXPERIMENT_TAGS), None
        if exp.lifecycle_stage != "deleted":
            return exp.experiment_id, None
        try:
            self.client.restore_experiment(exp.experiment_id)
        except Exception as e:  # noqa: BLE001 - said in the sweep's error and in /v1/health by the scheduler
            raise RuntimeError(
                f"the MLflow experiment {name} (id {exp.experiment_id}) is deleted and could not be restored ({e}); "
                "restore it in MLflow's UI, or remove it for good with `mlflow gc`"
            ) from e
        note = f"the experiment {name} was in MLflow's trash; groupscale restored it, with its earlier runs"
        log.warning("%s (id %s)", note, exp.experiment_id)
        return exp.experiment_id, note

    def _create_run(self, experiment_id: str, name: str, tags: dict[str, str], params: dict) -> str:
        run = self.client.create_run(experiment_id, run_name=name, tags=tags)
        self.client.log_batch(run.info.run_id, params=[Param(k, str(v)[:6000]) for k, v in params.items()])
        return run.info.run_id

    @outside_transaction
    def start_sweep(self, sweep_id: str, spec: SweepSpec, key: str) -> tuple[str, str]:
        """Create the sweep's parent run in the experiment ``groupscale/<key>`` (the sweep's task_key)."""
        exp_id, note = self._experiment(experiment_name(key))  # the sweep's stored task_key: data files not read again
        grid = {k: ",".join(map(str, getattr(spec, k))) for k in ("group_sizes", "samples_per_step", "seeds")}
        params = {**_spec_params(spec), **grid}
        tags = {"groupscale.sweep_id": sweep_id, "groupscale.kind": "sweep", **({"groupscale.note": note} if note else {})}
        run_id = self._create_run(exp_id, f"{spec.name} ({sweep_id})", tags, params)
        self.client.log_dict(run_id, spec.model_dump(mode="json"), "spec.json")
        self.client.log_inputs(run_id, datasets=[dataset_input(spec, key)])
        return exp_id, run_id

    @outside_transaction
    def start_trial(
        self,
        experiment_id: str,
        parent_run_id: str,
        spec: SweepSpec,
        trial_id: str,
        group_size: int,
        samples_per_step: int,
        seed: int,
        lr: float | None = None,
        key: str | None = None,
    ) -> str:
        """A child run of the sweep's parent (explicit mlflow.parentRunId tag, no active run), with the
        task as its dataset input (``dataset_input``).

        ``lr``: the learning rate the trial trains with (the tuned one under tune_lr; param ``lr``).
        ``key``: the sweep's stored task_key (default: computed again, reading the data files).
        """
        params = {
            **_spec_params(spec),
            "group_size": group_size,
            "samples_per_step": samples_per_step,
            "prompts_per_step": prompts_per_step(samples_per_step, group_size),
            "seed": seed,
            "lr": spec.grpo.lr if lr is None else lr,
        }
        tags = {"mlflow.parentRunId": parent_run_id, "groupscale.trial_id": trial_id, "groupscale.kind": "trial"}
        tags["mlflow.note.content"] = _trial_note(spec)  # the run's description in the MLflow UI
        run_id = self._create_run(experiment_id, f"G={group_size} B={samples_per_step} seed={seed}", tags, params)
        self.client.log_inputs(run_id, datasets=[dataset_input(spec, key or task_key(spec))])
        return run_id

    @outside_transaction
    def end_trial(self, run_id: str, status: str, reason: str | None = None) -> None:
        self.client.set_tag(run_id, "groupscale.status", status)
        if reason:
            self.client.set_tag(run_id, "groupscale.reason", reason[:5000])
        self.client.set_terminated(run_id, TRIAL_RUN_STATUS.get(status, "FAILED"))

    @outside_transaction
    def end_sweep(self, run_id: str, fit: LawFit | None, title: str, status: str = "FINISHED", about: dict | None = None) -> None:
        """Log the fit (metrics, fit.json, fit.png, g_star_over_time.png, report.html) on the parent run and
        end it with ``status``. ``about``: render_report's keywords (service.results.report_about: spec, created, trials)."""
        if fit is not None:
            values = {key: getattr(fit, key) for key in ("g_star", "recommended_group_size")}
            for b in fit.per_budget:
                values |= {f"B{b.samples_per_step}.{key}": getattr(b, key) for key in ("g_star", "a", "b", "c", "r2")}
            self.log_values(run_id, values, {"groupscale.fit_status": fit.status})
            self.client.log_dict(run_id, json.loads(fit.model_dump_json()), "fit.json")
            self.client.log_figure(run_id, plot_fit(fit, title), "fit.png")
            over_time = plot_g_star_over_time(fit, title)
            if over_time is not None:
                self.client.log_figure(run_id, over_time, "g_star_over_time.png")
            self.client.log_text(run_id, render_report(fit, title, **(about or {})), "report.html")
        self.client.set_terminated(run_id, status)

    @outside_transaction
    def reopen_sweep(self, run_id: str, spec: SweepSpec, added: int) -> None:
        """An extended sweep's parent run runs again (service.extend); its params keep the first grid (MLflow
        params cannot change), the tags give the grid now."""
        tags = {f"groupscale.{k}": ",".join(map(str, getattr(spec, k))) for k in ("group_sizes", "seeds")}
        tags["groupscale.extended_trials"] = str(added)
        self.client.log_batch(run_id, tags=[RunTag(k, v) for k, v in tags.items()])
        self.client.update_run(run_id, status="RUNNING")

    @outside_transaction
    def log_probe(self, probe_id: str, spec: SweepSpec, result: dict, kind: str = "probe") -> dict[str, str | None]:
        """One run per probe or answer (tag groupscale.kind=probe|answer): params, G* and what it cost, KIND.json; a
        probe's in its task's experiment, an answer's in ``<that>/answers`` (experiment_name). Returns where it is:
        {experiment (name), experiment_id, run_id, url (its page in MLflow's UI)}."""
        section = spec.probe if kind == "probe" else spec.answer
        params = {**_spec_params(spec), **{f"{kind}.{k}": v for k, v in section.model_dump().items()}}
        name = experiment_name(task_key(spec), "answers" if kind == "answer" else None)
        exp_id, note = self._experiment(name)
        tags = {"groupscale.probe_id": probe_id, "groupscale.kind": kind, **({"groupscale.note": note} if note else {})}
        run_id = self._create_run(exp_id, f"{kind} {spec.name} ({probe_id})", tags, params)
        tags = {}
        if kind == "probe":
            values = {k: result.get(k) for k in ("tau2", "sigma2", "kappa", "g_star", "samples", "seconds")}
        else:  # the typed answer (sweeps.answer.Answer): what the CLI, the API and the report read too
            answer = Answer.model_validate(result)
            lo, hi = answer.g_star_ci95 or [None, None]
            values = {"g_star": answer.g_star, "g_star_ci_low": lo, "g_star_ci_high": hi,
                      "recommended_group_size": answer.recommended_group_size, "samples": answer.cost.completions,
                      "seconds": answer.cost.seconds}  # fmt: skip
            tags = {"groupscale.answer_method": answer.method, "groupscale.evidence": answer.evidence}
        self.log_values(run_id, values, tags)
        self.client.log_dict(run_id, result, f"{kind}.json")
        self.client.set_terminated(run_id, "FINISHED")
        return {"experiment": name, "experiment_id": exp_id, "run_id": run_id, "url": self.run_url(exp_id, run_id)}

    @outside_transaction
    def log_values(self, run_id: str, values: dict, tags: dict[str, str] | None = None, step: int = 0) -> None:
        """The numeric values (None skipped) as metrics at ``step``, and the tags, in one request."""
        now = int(time.time() * 1000)
        metrics = [Metric(k, float(v), now, step) for k, v in values.items() if isinstance(v, int | float)]
        self.client.log_batch(run_id, metrics=metrics, tags=[RunTag(k, v) for k, v in (tags or {}).items()])

    @outside_transaction
    def log_decision(self, parent_run_id: str, point: Point, fit: LawFit | None, reason: str) -> None:
        """One decision of an adaptive sweep on its parent run, at step = the study's trial number (``point``, the
        study's): the (G, B) chosen and G* with its interval before that trial ran."""
        ci = (fit.g_star_ci95 if fit else None) or [None, None]
        values = {
            "adaptive.group_size": point.group_size,
            "adaptive.samples_per_step": point.samples_per_step,
            "adaptive.g_star": fit.g_star if fit else None,
            "adaptive.g_star_ci_low": ci[0],
            "adaptive.g_star_ci_high": ci[1],
        }
        self.log_values(parent_run_id, values, {"groupscale.adaptive.last_reason": reason[:5000]}, step=point.number)

    @outside_transaction
    def kill_tuning_runs(self, parent_run_id: str, group_size: int, samples_per_step: int) -> None:
        """End KILLED the tune_lr runs at (G, B) that a lost tuning task left RUNNING."""
        parent = self.client.get_run(parent_run_id)
        query = (
            f"tags.mlflow.parentRunId = '{parent_run_id}' and tags.`groupscale.phase` = 'tune_lr' and "
            f"tags.`groupscale.group_size` = '{group_size}' and tags.`groupscale.samples_per_step` = '{samples_per_step}' "
            "and attributes.status = 'RUNNING'"
        )
        for run in self.client.search_runs([parent.info.experiment_id], query):
            self.client.set_terminated(run.info.run_id, "KILLED")

    @outside_transaction
    def unended_trial_runs(self, experiment_id: str, parent_run_id: str) -> dict[str, str]:
        """Trial id -> run id of the sweep's trial runs (tag groupscale.trial_id) that have not ended FINISHED or FAILED:
        RUNNING (made, ahead or just before a crash, but not stored) or KILLED (a stop of `up` ended the run of a trial
        it sent back to pending, or one made ahead for a trial that had not started). A trial with several (duplicates
        made before each trial kept its run) gets its RUNNING one, else its latest."""
        children = f"tags.mlflow.parentRunId = '{parent_run_id}'"
        ended = "attributes.status != 'FINISHED' and attributes.status != 'FAILED'"  # IN takes run ids alone
        query = f"{children} and tags.`groupscale.kind` = 'trial' and {ended}"
        runs = self._search_all(experiment_id, query)
        runs.sort(key=lambda r: (r.info.status == "RUNNING", r.info.start_time or 0))  # the one to keep last
        return {r.data.tags["groupscale.trial_id"]: r.info.run_id for r in runs if "groupscale.trial_id" in r.data.tags}

    @outside_transaction
    def reopen_trial(self, run_id: str) -> None:
        """A trial that resumes continues its own run: RUNNING again if a stop of `up` ended it KILLED."""
        self.client.update_run(run_id, status="RUNNING")

    @outside_transaction
    def child_runs(self, experiment_id: str, parent_run_id: str) -> list[str]:
        """Ids of every active child run of ``parent_run_id``: trials' runs, runs made ahead, tuning runs."""
        return [r.info.run_id for r in self._search_all(experiment_id, f"tags.mlflow.parentRunId = '{parent_run_id}'")]

    def _search_all(self, experiment_id: str, query: str) -> list:
        """Every run of ``experiment_id`` that ``query`` finds, page by page (MLflow's ``search_runs`` filter)."""
        runs, token = [], None
        while True:
            page = self.client.search_runs([experiment_id], query, max_results=1000, page_token=token)
            runs.extend(page)
            token = page.token
            if not token:
                return runs

    @outside_transaction
    def kill(self, run_id: str) -> None:
        if self.client.get_run(run_id).info.status == RunStatus.to_string(RunStatus.RUNNING):
            self.client.set_terminated(run_id, "KILLED")

    @outside_transaction
    def healthy(self, timeout_s: float = 3.0) -> bool:
        """A fast check of the tracking server (calls through mlflow_call retry for up to GROUPSCALE_MLFLOW_RETRY_S)."""
        if not self.uri.startswith("http"):
            return True  # a local file or database store has no server to be down
        try:
            return httpx.get(f"{self.uri}/health", timeout=timeout_s).status_code == 200
        except httpx.HTTPError:
            return False


def dataset_input(spec: SweepSpec, key: str) -> DatasetInput:
    """The task as an MLflow dataset input (the run page's "Datasets used"; context ``training``).

    name and digest are the two parts of the sweep's task_key (service.identity: the digest covers a data
    task's file bytes and settings; a built-in task with default options gets the digest of its options),
    so runs on the same data show the same digest. Source: the data file(s) (type ``local``), or the
    built-in task (type ``code``). Profile: the task's settings (JSON).
    """
    task = spec.task
    options = task.model_dump(exclude={"name", "path", "eval_path", "label"}, mode="json")
    name, digest = key.rsplit(":", 1) if ":" in key else (key, short_digest(json.dumps(options, sort_keys=True)))
    paths = task.data_files
    if paths:
        source_type, source = "local", {"uri": str(paths[0]), **({"eval_uri": str(paths[1])} if len(paths) > 1 else {})}
    else:
        source_type, source = "code", {"tags": {"groupscale.task": task.name}}
    dataset = Dataset(name, digest, source_type, json.dumps(source), profile=json.dumps(options, sort_keys=True))
    return DatasetInput(dataset, tags=[InputTag("mlflow.data.context", "training")])


def _trial_note(spec: SweepSpec) -> str:
    """What a person reading a trial's charts should know: where learning shows, and which metrics are not logged
    because the trial's settings make them constant (sweeps.metrics.flat_by_construction)."""
    lines = [f"groupscale trial of sweep {spec.name}: the learning signal is in `reward_mean`, `grad_norm` and `gap`."]
    flat = get_engine(spec.engine).flat_metrics(spec)
    by_reason: dict[str, list[str]] = {}
    for key, why in flat.items():
        by_reason.setdefault(why, []).append(f"`{key}`")
    return "\n\n".join(lines + [f"Not logged, constant by construction: {', '.join(k)} ({why})." for why, k in by_reason.items()])

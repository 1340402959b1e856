"""HTTP schemas (the ``Public`` family; the create body is sweeps.spec.SweepSpec itself)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from service.lifecycle import ProbeStatus, SweepStatus, TrialStatus  # the statuses' one definition (their values in JSON)
from sweeps.fit.paired import PairedComparison


class Progress(BaseModel):
    done: int = Field(description="trials finished (succeeded or no_signal)")
    running: int
    failed: int
    cancelled: int = 0
    total: int = Field(description="trials of the grid; for mode adaptive, the trial budget max_trials (an upper bound)")
    g_star_ci95: list[float | None] | None = Field(None, description="mode adaptive: the current 95% interval of G*")
    tuning_done: int = Field(0, description="tune_lr: (G, B) learning-rate searches finished")
    tuning_total: int = Field(0, description="tune_lr: (G, B) learning-rate searches in all")


class MlflowLinks(BaseModel):
    tracking_uri: str | None
    experiment_id: str | None
    parent_run_id: str | None
    url: str | None = Field(description="MLflow UI page of the sweep's parent run")


class SweepPublic(BaseModel):
    id: str
    name: str
    status: SweepStatus
    spec: dict
    task_key: str = Field(
        description="what recommendations file the task under: a built-in's name, or label/kind and content digest"
    )
    model_key: str = Field(description="a preset's name, or the model folder's path and config digest")
    progress: Progress
    mlflow: MlflowLinks
    fit_status: str | None = None
    g_star: float | None = None
    recommended_group_size: int | None = None
    step_structure: list[str] | None = Field(
        None, description="engine trl: how each generation batch of B is split into optimizer steps, per budget B"
    )
    created_at: datetime
    updated_at: datetime
    error: str | None = None
    warnings: list[str] = Field(
        default_factory=list, description="at submit: what was accepted but looks like a mistake (not stored)"
    )


class TrialPublic(BaseModel):
    model_config = ConfigDict(from_attributes=True)  # built from the store's Trial row
    id: str
    sweep_id: str
    group_size: int
    samples_per_step: int
    prompts_per_step: int
    seed: int
    status: TrialStatus
    metrics: dict[str, float | None] = Field(default_factory=dict)
    reason: str | None
    mlflow_run_id: str | None
    attempts: int
    seconds: float | None
    updated_at: datetime


class Recommendation(BaseModel):
    """Answer to "which G should I use for this task and model (at this budget)?"."""

    task: str
    model: str
    task_key: str = Field(description="the task_key of the sweep the answer comes from")
    model_key: str = Field(description="the model_key of the sweep the answer comes from")
    samples_per_step: int | None
    recommended_group_size: int | None
    g_star: float | None
    g_star_ci95: list[float | None] | None
    status: str = Field(description="status of the fit the answer comes from")
    evidence: str | None = Field(
        None, description="how far that fit supports the answer: strong, weak, empirical or none (sweeps.fit)"
    )
    evidence_reason: str = ""
    comparison: PairedComparison | None = Field(None, description="the fit's paired comparison of the best G (sweeps.fit.paired)")
    probe: dict | None = Field(
        None,
        description="the latest succeeded probe of the same task and model: {id, g_star, g_star_ci95, recommended_group_size}",
    )
    sweep_id: str
    message: str


class ComponentHealth(BaseModel):
    ok: bool
    detail: str = ""


class Health(BaseModel):
    status: Literal["ok", "degraded"]
    controller: ComponentHealth
    ray: ComponentHealth
    mlflow: ComponentHealth
    store: ComponentHealth
    workers: dict[str, int] = Field(
        default_factory=dict, description="warm trial workers: busy (running a trial), idle, starting (importing)"
    )


class ProbePublic(BaseModel):
    model_config = ConfigDict(from_attributes=True)  # built from the store's Probe row
    id: str
    status: ProbeStatus
    spec: dict
    result: dict | None = None
    error: str | None = None
    mlflow_run_id: str | None = None
    progress: dict | None = Field(
        None,
        description="what the job's task reported last: {stage (data, model, probe, pilot, halving), label (in words), "
        "done, total (null: not counted), stages: [{stage, label}] (each stage's first report, in order)}; null until "
        "its first report; kept once it ended",
    )
    created_at: datetime
    updated_at: datetime


class AnswerPublic(ProbePublic):
    """An answer request (POST /v1/answers): result is sweeps.answer.Answer's JSON once it succeeded, and ``mlflow``: where
    its run is ({experiment, experiment_id, run_id, url}; answers have their experiment, ``groupscale/<task_key>/answers``)."""

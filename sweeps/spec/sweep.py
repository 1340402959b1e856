"""The sweep spec itself (SweepSpec): the grid of (G, B, seed) and every section, validated together."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationInfo, field_validator

from sweeps.spec.base import (
    ENGINES,
    MAX_COMPLETION_TOKENS,
    MAX_GROUP_SIZE,
    MAX_SAMPLES_PER_STEP,
    JsonObject,
    StrictModel,
    get_engine,
)
from sweeps.spec.grpo import GRPOSpec
from sweeps.spec.model import ModelSpec
from sweeps.spec.sections import AdaptiveSpec, AnswerSpec, EvalSpec, MeasureSpec, ProbeSpec, ResourcesSpec, TuneLRSpec
from sweeps.spec.task import DatasetTaskSpec, JsonlTaskSpec, TaskSpec


def _engine_names(schema: dict[str, Any]) -> None:
    """The JSON schema of ``engine``: the registered names, read when the schema is made."""
    schema["enum"] = list(ENGINES)


def _check_token_budget(tokens: int, data: dict[str, Any]) -> None:
    """``tokens_per_step`` with what its controller (workers.token_budget) trains: engine groupscale, one samples_per_step
    (the most completions a generation may sample), uniform groups, measure outcome, no dynamic sampling (a second rule
    for the step's size), and a budget that a generation can meet: k Z no more than B completions of at most
    grpo.max_new_tokens hold, and at least the smallest generation's tokens (one prompt a process at the largest G,
    completions of one token). Raises ValueError naming the setting and the allowed values (the field is the loc)."""
    engine, budgets, groups = data.get("engine"), data.get("samples_per_step"), data.get("group_sizes")
    grpo, measure, resources = data.get("grpo"), data.get("measure"), data.get("resources")
    if engine is not None and engine != "groupscale":
        raise ValueError(
            f"engine {engine} samples a fixed number of completions a step; a budget in tokens trains on engine groupscale"
        )
    if budgets is not None and len(budgets) != 1:
        raise ValueError(
            f"samples_per_step is then the most completions one generation may sample: give one value, got {budgets}"
        )
    if grpo is None or not budgets or not groups:  # their own errors are reported
        return
    if grpo.dynamic_sampling is not None:
        raise ValueError("grpo.dynamic_sampling sizes each step by its own rule; allowed: one of the two")
    if grpo.allocation != "uniform":
        raise ValueError("grpo.allocation per_prompt fills B itself; allowed with grpo.allocation uniform")
    if measure is not None and measure.kind != "outcome":
        raise ValueError(f"measure.kind {measure.kind} measures one batch of B completions; allowed with measure.kind outcome")
    k, most = grpo.steps_per_generation, budgets[0] * grpo.max_new_tokens
    if k * tokens > most:
        raise ValueError(
            f"a generation feeds {k} step(s) (grpo.steps_per_generation) and needs {k * tokens} tokens, but its "
            f"{budgets[0]} completions (samples_per_step) of at most {grpo.max_new_tokens} tokens (grpo.max_new_tokens) "
            f"hold {most}; allowed: at most {most // k}, or a larger samples_per_step"
        )
    least = (resources.num_processes if resources is not None else 1) * max(groups)
    if tokens < least:
        raise ValueError(
            f"the smallest generation, one prompt a process at G = {max(groups)} with one-token completions, spends "
            f"{least} tokens a step; allowed: at least {least}, or smaller group sizes"
        )


class SweepSpec(StrictModel):
    """A sweep over (G, B, seed): every point of the grid (``mode: grid``) or the points an Optuna
    study picks (``mode: adaptive``); every trial with the same steps T."""

    name: str = Field(..., min_length=1, max_length=128, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    task: TaskSpec
    model: ModelSpec
    # samples_per_step is declared before group_sizes so that the divisibility check can see it.
    samples_per_step: list[Annotated[int, Field(ge=2, le=MAX_SAMPLES_PER_STEP)]] = Field(
        ..., min_length=1, max_length=16, description="budgets B (completions per step)"
    )
    group_sizes: list[Annotated[int, Field(ge=2, le=MAX_GROUP_SIZE)]] = Field(
        ..., min_length=1, max_length=64, description="group sizes G (completions per prompt), each >= 2"
    )
    seeds: list[Annotated[int, Field(ge=0, le=2**31 - 1)]] = Field(default_factory=lambda: [0], min_length=1, max_length=64)
    steps: int = Field(150, ge=1, le=1_000_000, description="optimizer steps T per trial")
    checkpoint_every: int = Field(50, ge=0, le=1_000_000, description="steps between trial checkpoints (0: none)")
    grpo: GRPOSpec = Field(default_factory=GRPOSpec)
    eval: EvalSpec = Field(default_factory=EvalSpec)
    resources: ResourcesSpec = Field(default_factory=ResourcesSpec)
    measure: MeasureSpec = Field(default_factory=MeasureSpec)
    probe: ProbeSpec = Field(default_factory=ProbeSpec)
    answer: AnswerSpec = Field(default_factory=AnswerSpec)
    mode: Literal["grid", "adaptive"] = "grid"
    adaptive: AdaptiveSpec = Field(default_factory=AdaptiveSpec)
    tune_lr: TuneLRSpec | None = None
    max_failed_trials: int | None = Field(
        None,
        ge=0,
        le=100_000,
        description="failure budget (Katib's maxFailedTrialCount): once more trials than this failed, the sweep ends "
        "failed and its other trials are cancelled; default a quarter of the trials, at least 3",
    )
    engine: str = Field(
        "groupscale",
        description="who trains each trial: groupscale's GRPO trainer, or TRL's GRPOTrainer on the trl: recipe",
        json_schema_extra=_engine_names,
    )
    tokens_per_step: int | None = Field(
        None,
        ge=1,
        le=MAX_SAMPLES_PER_STEP * MAX_COMPLETION_TOKENS,
        description="a budget in completion tokens a step (Z; engine groupscale): each generation samples N = Z / (G "
        "lbar) prompts, lbar the last generation's mean completion length, the spend carried over (THEORY.md 'A budget "
        "in tokens'); samples_per_step, one value, is then the most completions a step may sample; default none (a "
        "budget in completions)",
    )
    trl: JsonObject | None = Field(
        None,
        validate_default=True,
        description="engine trl: GRPOConfig fields, passed to TRL as they are but for what a sweep sets (num_generations, "
        "the batch settings of B, max_steps, seed, output_dir, logging, saving)",
    )

    @field_validator("model")
    @classmethod
    def _model_fits_task(cls, v: ModelSpec, info: ValidationInfo) -> ModelSpec:
        task = info.data.get("task")
        if task is None:
            return v
        if (task.name == "bandit") != (v.preset == "tabular"):
            needs = (
                "model: {preset: tabular}"
                if task.name == "bandit"
                else "a language model (preset tiny-llama, chat-tiny or a path)"
            )
            raise ValueError(f"task {task.name!r} needs {needs}")
        if v.lora is not None and v.preset == "tabular":
            raise ValueError("model.lora adapts a language model; the tabular policy of task bandit has no layers to adapt")
        if task.name == "dataset" and v.preset == "tiny-llama":
            raise ValueError(
                "preset tiny-llama is built for a task's character vocabulary; with task dataset use "
                "preset chat-tiny or model.path"
            )
        if task.name == "dataset" and task.prompt_format == "chat" and not v.chat_template:
            raise ValueError(
                "task.prompt_format chat renders string prompts with the model's chat template, which "
                "model.chat_template false turns off; allowed: task.prompt_format auto or raw, or model.chat_template true"
            )
        return v

    @field_validator("measure")
    @classmethod
    def _measure_fits_task(cls, v: MeasureSpec, info: ValidationInfo) -> MeasureSpec:
        task = info.data.get("task")
        resources = info.data.get("resources")
        if v.kind == "gradient_mse" and resources is not None and resources.num_processes > 1:
            raise ValueError(
                "measure.kind gradient_mse measures on one process; allowed with resources.num_processes 1 "
                f"(got {resources.num_processes})"
            )
        grpo = info.data.get("grpo")
        if v.kind == "gradient_mse" and grpo is not None and grpo.allocation != "uniform":
            raise ValueError("measure.kind gradient_mse measures uniform groups; allowed with grpo.allocation uniform")
        if v.kind == "gradient_mse" and task is not None and not task.exact_expected_reward:
            raise ValueError(
                "measure.kind gradient_mse needs an exact expected reward; allowed with tasks "
                "arithmetic, bandit, jsonl with reward exact_match, or dataset with one exact_match reward"
            )
        return v

    @field_validator("probe")
    @classmethod
    def _probe_fits_model(cls, v: ProbeSpec, info: ValidationInfo) -> ProbeSpec:
        model = info.data.get("model")
        if v.parameters == "lora" and model is not None and model.lora is None:
            raise ValueError("probe.parameters lora takes scores over the adapter: set model.lora")
        return v

    @field_validator("samples_per_step", "seeds")
    @classmethod
    def _unique(cls, v: list[int], info: ValidationInfo) -> list[int]:
        if len(set(v)) != len(v):
            raise ValueError(f"{info.field_name} has repeated values: {v}")
        return sorted(v)

    @field_validator("group_sizes")
    @classmethod
    def _groups_divide_budgets(cls, v: list[int], info: ValidationInfo) -> list[int]:
        if len(set(v)) != len(v):
            raise ValueError(f"group_sizes has repeated values: {v}")
        budgets = info.data.get("samples_per_step")
        if not budgets:  # the budget field failed its own validation; that error is reported
            return sorted(v)
        for b in budgets:
            if bad := [g for g in v if b % g]:
                raise ValueError(
                    f"group size(s) {', '.join(map(str, bad))} do not divide samples_per_step {b}; "
                    f"valid group sizes for B={b}: {', '.join(map(str, valid_group_sizes(b)))}"
                )
        return sorted(v)

    @field_validator("resources")
    @classmethod
    def _groups_for_every_process(cls, v: ResourcesSpec, info: ValidationInfo) -> ResourcesSpec:
        groups, budgets = info.data.get("group_sizes"), info.data.get("samples_per_step")
        grpo = info.data.get("grpo")
        if v.num_processes > 1 and grpo is not None and grpo.allocation != "uniform":
            raise ValueError(f"num_processes={v.num_processes}: grpo.allocation per_prompt trains on one process; allowed: 1")
        if v.num_processes == 1 or not groups or not budgets:
            return v
        short = [(g, b) for b in budgets for g in groups if b // g < v.num_processes]
        if short:
            g, b = short[0]
            allowed = [g for g in valid_group_sizes(b) if b // g >= v.num_processes]
            raise ValueError(
                f"num_processes={v.num_processes}: G={g} at B={b} gives {b // g} groups, and each process trains whole "
                f"groups (at least one); allowed at B={b}: G in {allowed or 'none'} (B / G >= num_processes), or fewer "
                "processes"
            )
        return v

    @field_validator("tune_lr")
    @classmethod
    def _tune_lr_needs_training(cls, v: TuneLRSpec | None, info: ValidationInfo) -> TuneLRSpec | None:
        measure = info.data.get("measure")
        if v is not None and measure is not None and measure.kind != "outcome":
            raise ValueError("tune_lr needs measure.kind outcome (gradient_mse trials do not train, so lr has no effect)")
        return v

    @field_validator("mode")
    @classmethod
    def _adaptive_has_room(cls, v: str, info: ValidationInfo) -> str:
        groups = info.data.get("group_sizes")
        if v == "adaptive" and groups is not None and len(groups) < 3:
            raise ValueError(f"mode adaptive needs at least 3 group_sizes to choose from, got {groups}")
        return v

    @field_validator("adaptive")
    @classmethod
    def _max_trials_hold_the_initial_design(cls, v: AdaptiveSpec, info: ValidationInfo) -> AdaptiveSpec:
        groups, budgets = info.data.get("group_sizes"), info.data.get("samples_per_step")
        if info.data.get("mode") == "adaptive" and groups and budgets:
            k, n = v.initial_group_sizes(len(groups)), len(budgets)
            if v.max_trials < k * n:
                raise ValueError(
                    f"adaptive.max_trials={v.max_trials} cannot hold the initial design ({k} distinct G x {n} "
                    f"budget{'s' if n > 1 else ''} = {k * n} trials); allowed: at least {k * n}"
                )
        return v

    @field_validator("engine")
    @classmethod
    def _known_engine(cls, v: str) -> str:
        return get_engine(v).name  # a ValueError names the valid engines

    @field_validator("tokens_per_step")
    @classmethod
    def _token_budget_trains(cls, v: int | None, info: ValidationInfo) -> int | None:
        if v is not None:
            _check_token_budget(v, info.data)
        return v

    @field_validator("trl")
    @classmethod
    def _engine_fits(cls, v: dict[str, Any] | None, info: ValidationInfo) -> dict[str, Any] | None:
        if "engine" in info.data:  # else the engine's own error is reported
            get_engine(info.data["engine"]).check_sections({**info.data, "trl": v})  # names the field and what is allowed
        return v

    @property
    def trl_recipe(self) -> dict[str, Any]:
        """The trl: section (empty for TRL's defaults)."""
        return dict(self.trl or {})

    def with_paths_from(self, base: Path) -> SweepSpec:
        """The spec with relative file paths (task data and prompt template, reward files found there, model folder)
        made absolute from ``base`` (a spec file's folder), so a spec travels with its files. Absolute paths are kept
        as they are, and so is a relative reward file that is not under ``base`` (the server resolves it against
        GROUPSCALE_REWARD_ROOT)."""

        def absolute(path: str | None) -> str | None:
            return None if path is None or Path(path).expanduser().is_absolute() else str((base / path).resolve())

        task, model = self.task, self.model
        if isinstance(task, JsonlTaskSpec | DatasetTaskSpec):
            update: dict[str, Any] = {"path": absolute(task.path)}
            if isinstance(task, DatasetTaskSpec):
                update["eval_path"] = absolute(task.eval_path)
                update["prompt_template"] = absolute(task.prompt_template)  # a data file like the data
                rewards = []
                for r in task.rewards:
                    file, _, name = (r.function or "").rpartition(":")
                    here = absolute(file) if file else None
                    # a FILE that is not beside the spec stays relative: the server resolves it against its reward root
                    found = here is not None and Path(here).is_file()
                    rewards.append(r.model_copy(update={"function": f"{here}:{name}"}) if found else r)
                update["rewards"] = rewards
            task = task.model_copy(update={k: v for k, v in update.items() if v is not None})
        if absolute(model.path):
            model = model.model_copy(update={"path": absolute(model.path)})
        return self.model_copy(update={"task": task, "model": model})

    def request(self) -> dict[str, Any]:
        """The spec as JSON for the API (the CLI's body): the resources under the names the spec gave, not those
        derived from them (ResourcesSpec.named: the server's messages name the field the user wrote)."""
        body = self.model_dump(mode="json")
        derived = set(ResourcesSpec.model_fields) - self.resources.model_fields_set - {"num_processes"}
        body["resources"] = {k: v for k, v in body["resources"].items() if k not in derived}
        return body

    @property
    def n_trials(self) -> int:
        """Trials of the sweep proper: the whole grid, or the adaptive trial budget (an upper bound)."""
        if self.mode == "adaptive":
            return self.adaptive.max_trials
        return len(self.group_sizes) * len(self.samples_per_step) * len(self.seeds)

    @property
    def failure_budget(self) -> int:
        """How many trials may fail before the sweep ends failed: max_failed_trials, else max(3, n_trials // 4)."""
        return self.max_failed_trials if self.max_failed_trials is not None else max(3, self.n_trials // 4)

    @property
    def n_tuning_trials(self) -> int:
        """Learning-rate tuning trials before the sweep proper (0 without tune_lr)."""
        return 0 if self.tune_lr is None else self.tune_lr.trials * len(self.group_sizes) * len(self.samples_per_step)


def valid_group_sizes(samples_per_step: int) -> list[int]:
    """Group sizes allowed at budget B: the divisors G >= 2 of B (so N = B / G is whole)."""
    return [g for g in range(2, samples_per_step + 1) if samples_per_step % g == 0]

"""The sweep spec: one pydantic model validates YAML files, JSON bodies and CLI input alike.

A sweep trains GRPO at every group size G in ``group_sizes`` under every budget B in
``samples_per_step`` (B = N * G completions per optimizer step, N = B / G prompts), for every seed.
Validation happens here, before anything is scheduled; every error names the field and what is
allowed (DESIGN.md, "Requirements that hold everywhere").
"""

from __future__ import annotations

import difflib
import typing
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

# Names the workers implement; tests/workers check that the registries agree with these.
TASK_NAMES = ("arithmetic", "bandit", "jsonl", "dataset")
REWARD_NAMES = ("exact_match", "numeric_match", "math_verify")
PRESET_NAMES = ("tiny-llama", "chat-tiny", "tabular")
DTYPE_NAMES = ("auto", "float32", "bfloat16")
# A user reward function: FILE.py:NAME (FILE must lie under GROUPSCALE_REWARD_ROOT on the server).
FUNCTION_PATTERN = r"^[^\x00]+\.py:[A-Za-z_][A-Za-z0-9_]*$"
ADVANTAGE_NAMES = ("loo", "mean", "mean_std", "oracle")
OPTIMIZER_NAMES = ("adamw", "sgd")
LOSS_AGGREGATION_NAMES = ("token_mean", "seq_mean_token_mean", "seq_mean_token_sum_norm")

# apply_chat_template's own arguments: chat_template_kwargs cannot set them (groupscale renders prompts one way).
TEMPLATE_ARGUMENTS = (
    "conversation",
    "tools",
    "documents",
    "chat_template",
    "add_generation_prompt",
    "continue_final_message",
    "tokenize",
    "padding",
    "truncation",
    "max_length",
    "return_tensors",
    "return_dict",
    "return_assistant_tokens_mask",
    "tokenizer_kwargs",
)

MAX_GROUP_SIZE = 4096
MAX_COMPLETION_TOKENS = 1 << 17  # reasoning recipes ask for 8192 to 32768 tokens and more
MAX_SAMPLES_PER_STEP = 1 << 20


class _Strict(BaseModel):
    # strict: no "20" -> 20 or true -> 1 coercion; no NaN or infinity in any float.
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


class ArithmeticTaskSpec(_Strict):
    """Prompts ``a+b=`` with 0 <= a, b <= max_operand; reward 1 for the exact sum, else 0."""

    name: Literal["arithmetic"]
    max_operand: int = Field(49, ge=9, le=999, description="largest operand (inclusive)")


class BanditTaskSpec(_Strict):
    """Tabular softmax contextual bandit with Bernoulli rewards (THEORY.md check instance: 20, 6, 0)."""

    name: Literal["bandit"]
    contexts: int = Field(20, ge=1, le=10_000, description="M, contexts (uniform)")
    arms: int = Field(6, ge=2, le=1_000, description="K, arms per context")
    seed: int = Field(0, ge=0, le=2**31 - 1, description="numpy default_rng seed of logits and success rates")


class JsonlTaskSpec(_Strict):
    """Your data, the simple way: one {"prompt": ..., "answer": ...} object a line; a fixed share held out."""

    name: Literal["jsonl"]
    path: str = Field(..., min_length=1, max_length=4096, description="local .jsonl file")
    reward: Literal["exact_match", "numeric_match"] = "exact_match"
    eval_fraction: float = Field(0.2, gt=0, lt=1, description="share of lines held out for evaluation")

    @property
    def exact_expected_reward(self) -> bool:
        return self.reward == "exact_match"


class RewardSpec(_Strict):
    """One term of a dataset task's reward, times ``weight``: a built-in (``name``, comparing against
    ``answer_column``) or a user function (``function: FILE.py:NAME``). A function follows TRL's calling
    convention (``convention: trl``; with ``kwargs`` NAME is a factory, called once as ``NAME(**kwargs)``)
    or verl's (``convention: verl``: NAME is ``compute_score(data_source, solution_str, ground_truth,
    extra_info)``, called once per completion, ``kwargs`` are its reward_kwargs and ``answer_column`` the
    ground truth)."""

    function: str | None = Field(
        None,
        max_length=4096,
        pattern=FUNCTION_PATTERN,
        description="FILE.py:NAME, FILE under the server's GROUPSCALE_REWARD_ROOT (a relative FILE is resolved against it)",
    )
    name: Literal["exact_match", "numeric_match", "math_verify"] | None = None
    answer_column: str | None = Field(
        None,
        min_length=1,
        max_length=256,
        description="the column with the answer, or a dotted path into a nested one; built-ins (default answer) and "
        "verl scorers (default reward_model.ground_truth)",
    )
    kwargs: dict[str, Any] | None = Field(
        None, description="trl: the factory's arguments (NAME(**kwargs) gives the reward function); verl: reward_kwargs"
    )
    convention: Literal["trl", "verl"] = Field(
        "trl", description="how a function is called: TRL's reward_funcs or verl's compute_score"
    )
    weight: float = Field(1.0, ge=-1e6, le=1e6, description="the term's weight in the summed reward")

    @model_validator(mode="before")
    @classmethod
    def _old_default(cls, data: Any) -> Any:
        # Specs stored before answer_column became optional hold its old default on function entries too.
        if isinstance(data, dict) and data.get("function") and data.get("convention", "trl") == "trl":
            if data.get("answer_column") == "answer":
                data = {k: v for k, v in data.items() if k != "answer_column"}
        return data

    @model_validator(mode="after")
    def _exactly_one(self) -> RewardSpec:
        if (self.function is None) == (self.name is None):
            raise ValueError(f"give exactly one of function (FILE.py:NAME) or name (one of: {', '.join(REWARD_NAMES)})")
        if self.name is not None and (self.kwargs is not None or self.convention != "trl"):
            raise ValueError(f"kwargs and convention belong to a function entry, not to the built-in {self.name!r}")
        if self.function is not None and self.convention == "trl" and self.answer_column is not None:
            raise ValueError(
                "answer_column belongs to built-ins and verl scorers; a TRL-style function receives every column "
                "as a keyword argument"
            )
        return self


DEFAULT_EVAL_FRACTION = 0.1


class DatasetTaskSpec(_Strict):
    """Your task, the TRL way: a local dataset (file or save_to_disk folder) read with Hugging Face
    ``datasets``; ``prompt_column`` holds a string or chat messages; every other column goes to the
    reward functions with its row (TRL's convention)."""

    name: Literal["dataset"]
    path: str = Field(
        ..., min_length=1, max_length=4096, description=".jsonl .json .parquet .csv .arrow file, or a save_to_disk folder"
    )
    split: str | None = Field(None, min_length=1, max_length=128, description="split of a save_to_disk DatasetDict folder")
    prompt_column: str = Field("prompt", min_length=1, max_length=256)
    eval_fraction: float | None = Field(None, gt=0, lt=1, description="share of rows held out (seeded); default 0.1")
    eval_path: str | None = Field(
        None, min_length=1, max_length=4096, description="held-out rows: a second dataset of the same shape"
    )
    label: str | None = Field(
        None,
        min_length=1,
        max_length=40,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$",
        description="name recommendations are filed under, with the content digest",
    )
    max_reward: float = Field(1.0, gt=0, le=1e6, description="best reward a completion can get (gap = max_reward - reward)")
    rewards: list[RewardSpec] = Field(..., min_length=1, max_length=16, description="summed, weighted")

    @model_validator(mode="after")
    def _one_eval_source(self) -> DatasetTaskSpec:
        if self.eval_fraction is not None and self.eval_path is not None:
            raise ValueError("give eval_fraction or eval_path, not both")
        return self

    @property
    def exact_expected_reward(self) -> bool:
        """One exact_match term: the expected reward is computed exactly by teacher forcing."""
        return len(self.rewards) == 1 and self.rewards[0].name == "exact_match"


TaskSpec = Annotated[ArithmeticTaskSpec | BanditTaskSpec | JsonlTaskSpec | DatasetTaskSpec, Field(discriminator="name")]


class LoraSpec(_Strict):
    """``model.lora``: train a LoRA adapter instead of every weight (peft's LoraConfig; both engines)."""

    r: int = Field(16, ge=1, le=4096, description="the adapter's rank")
    alpha: float = Field(32.0, gt=0, le=1e6, description="lora_alpha: the update is scaled by alpha / r")
    dropout: float = Field(0.05, ge=0, lt=1, description="lora_dropout")
    target_modules: list[Annotated[str, Field(min_length=1, max_length=256)]] | Literal["all-linear"] = Field(
        "all-linear", description="module names to adapt (q_proj, v_proj, ...), or all-linear"
    )


class ModelSpec(_Strict):
    """Either a built-in preset (tiny, built from a transformers config) or a local HF folder."""

    preset: Literal["tiny-llama", "chat-tiny", "tabular"] | None = None
    path: str | None = Field(None, max_length=4096, description="local Hugging Face model folder")
    dtype: Literal["auto", "float32", "bfloat16"] = Field(
        "auto", description="weights' dtype; auto: bfloat16 on CUDA, else float32"
    )
    chat_template: bool = Field(True, description="render conversational prompts with the tokenizer's chat template")
    attn_implementation: Literal["eager", "sdpa", "flash_attention_2", "flex_attention"] | None = Field(
        None, description="passed to from_pretrained (default: transformers' choice)"
    )
    lora: LoraSpec | None = Field(None, description="train a LoRA adapter (r, alpha, dropout, target_modules)")
    chat_template_kwargs: dict[str, Any] | None = Field(
        None,
        description="extra variables of the chat template wherever prompts are rendered (training, eval, probe), "
        "as TRL's chat_template_kwargs: e.g. {enable_thinking: false}",
    )

    @field_validator("chat_template_kwargs")
    @classmethod
    def _template_variables(cls, v: dict[str, Any] | None) -> dict[str, Any] | None:
        taken = sorted(set(v or ()) & set(TEMPLATE_ARGUMENTS))
        if taken:
            raise ValueError(
                f"{', '.join(taken)}: set by groupscale when it renders prompts; allowed: the template's own "
                f"variables (not {', '.join(TEMPLATE_ARGUMENTS)})"
            )
        return v

    @model_validator(mode="after")
    def _exactly_one(self) -> ModelSpec:
        if (self.preset is None) == (self.path is None):
            raise ValueError(f"give exactly one of model.preset (one of: {', '.join(PRESET_NAMES)}) or model.path")
        return self

    @property
    def label(self) -> str:
        """The preset's name, or the folder's path (the server files recommendations under its model_key)."""
        return self.preset or str(self.path)


# TRL's GRPOConfig names accepted in ``grpo:`` (README "Coming from TRL / verl"): TRL name -> ours.
TRL_ALIASES = {
    "epsilon": "clip_eps",
    "epsilon_high": "clip_eps_high",
    "beta": "kl_beta",
    "num_iterations": "inner_steps",
    "max_completion_length": "max_new_tokens",
    "learning_rate": "lr",
    "loss_type": "loss_aggregation",
    "scale_rewards": "advantage",
}
# TRL's loss_type -> our loss_aggregation (TRL trainer/grpo_trainer.py: the normaliser of the token losses).
TRL_LOSS_TYPES = {"grpo": "seq_mean_token_mean", "dapo": "token_mean", "bnpo": "token_mean", "dr_grpo": "seq_mean_token_sum_norm"}
# TRL's scale_rewards -> our advantage (True and False are TRL's older spellings of group and none).
TRL_SCALE_REWARDS = {"group": "mean_std", True: "mean_std", "none": "mean", False: "mean"}


def _from_trl(data: Any) -> Any:
    """``grpo:`` with TRL's names rewritten to groupscale's (TRL_ALIASES), values mapped where TRL's differ.

    Raises:
        ValueError: a name and its alias both given; a loss_type or scale_rewards groupscale does not run.
    """
    if not isinstance(data, dict) or not set(data) & set(TRL_ALIASES):
        return data
    out = {k: v for k, v in data.items() if k not in TRL_ALIASES}
    for trl, ours in TRL_ALIASES.items():
        if trl not in data:
            continue
        if ours in data:
            raise ValueError(f"give {trl} (TRL's name) or {ours}, not both: they are the same setting")
        value = data[trl]
        if trl == "loss_type":
            if value not in TRL_LOSS_TYPES:
                raise ValueError(
                    f"loss_type {value!r} is not one groupscale runs; allowed: {', '.join(TRL_LOSS_TYPES)} "
                    f"(or loss_aggregation: {', '.join(LOSS_AGGREGATION_NAMES)})"
                )
            value = TRL_LOSS_TYPES[value]
        elif trl == "scale_rewards":
            if value == "batch":
                raise ValueError(
                    "scale_rewards 'batch' is refused: it divides by the standard deviation over the whole batch, "
                    "so a group's advantages depend on the other prompts in the step and on G, which the law of "
                    "THEORY.md does not model; allowed: group, none (or advantage: loo, mean, mean_std)"
                )
            if not isinstance(value, (str, bool)) or value not in TRL_SCALE_REWARDS:
                raise ValueError(f"scale_rewards {value!r} is not allowed; allowed: group, none (batch is refused)")
            value = TRL_SCALE_REWARDS[value]
        out[ours] = value
    return out


class GRPOSpec(_Strict):
    """GRPO hyper-parameters. TRL's GRPOConfig names (TRL_ALIASES) are accepted with the same meaning and
    shown back under groupscale's names."""

    @model_validator(mode="before")
    @classmethod
    def _trl_names(cls, data: Any) -> Any:
        return _from_trl(data)

    advantage: Literal["loo", "mean", "mean_std", "oracle"] = "loo"
    optimizer: Literal["adamw", "sgd"] = "adamw"
    lr: float = Field(2e-4, gt=0, le=1000.0, description="learning rate")
    temperature: float = Field(1.0, gt=0, le=10.0, description="sampling temperature; G > 1 needs > 0")
    max_new_tokens: int = Field(4, ge=1, le=MAX_COMPLETION_TOKENS, description="completion length cap (tokens)")
    clip_eps: float = Field(0.2, gt=0, lt=1, description="PPO clip range epsilon")
    clip_eps_high: float | None = Field(None, gt=0, le=10, description="upper clip epsilon (DAPO clip-higher); default clip_eps")
    reward_scale: float = Field(1.0, gt=0, le=1e6, description="rewards are multiplied by this before advantages")
    inner_steps: int = Field(1, ge=1, le=16, description="optimizer steps per batch (mu)")
    kl_beta: float = Field(0.0, ge=0, le=100, description="KL penalty weight to the reference policy")
    loss_aggregation: Literal["token_mean", "seq_mean_token_mean", "seq_mean_token_sum_norm"] = "seq_mean_token_mean"
    max_grad_norm: float = Field(1.0, gt=0, le=1e6, description="gradient clipping norm")
    micro_batch_size: int | None = Field(
        None,
        ge=1,
        le=MAX_SAMPLES_PER_STEP,
        description="completions per forward/backward pass (gradient accumulation; "
        "the same update as one pass over B); default all of B",
    )
    generation_batch_size: int | None = Field(
        None, ge=1, le=MAX_SAMPLES_PER_STEP, description="completions per generate() call; default all of B"
    )
    gradient_checkpointing: bool = Field(False, description="recompute activations in the backward pass (less memory)")


class EvalSpec(_Strict):
    prompts: int = Field(512, ge=1, le=100_000, description="held-out prompts for the final eval")
    samples_per_prompt: int = Field(
        4, ge=1, le=1024, description="sampled completions per held-out prompt (tasks without an exact expected reward)"
    )
    batch_size: int = Field(256, ge=1, le=100_000, description="completions per generation pass of the eval")
    every: int | None = Field(
        None,
        ge=1,
        le=100_000,
        description="also evaluate every this many steps (same prompts and seed; metric gap at that step, the fit's by_step)",
    )

    def checkpoints(self, steps: int) -> list[int]:
        """The steps at which a trial of T = ``steps`` steps is evaluated: every ``every`` steps, and T."""
        return sorted({*range(self.every, steps, self.every), steps} if self.every else {steps})


class MeasureSpec(_Strict):
    """What a trial measures: ``outcome`` (train T steps, then the held-out gap) or ``gradient_mse``
    (at the starting policy, the batch gradient's MSE against the exact gradient over ``repeats`` draws)."""

    kind: Literal["outcome", "gradient_mse"] = "outcome"
    repeats: int = Field(256, ge=2, le=100_000, description="gradient draws per trial (gradient_mse)")

    @property
    def metric(self) -> str:
        """The trial metric the law is fitted to."""
        return "gap" if self.kind == "outcome" else "grad_mse"


class ProbeSpec(_Strict):
    """The variance-component probe: K prompts x M completions at the starting policy."""

    prompts: int = Field(256, ge=2, le=100_000, description="K, prompts")
    completions: int = Field(16, ge=4, le=1024, description="M, completions per prompt (>= 4)")
    projection_dim: int = Field(512, ge=8, le=65_536, description="score vectors are sketched to this size when larger")
    parameters: str = Field(
        "all",
        pattern=r"^(all|lm_head|lora|last_layers:[1-9][0-9]{0,3})$",
        description="scores over: all, lm_head, lora (the adapter of model.lora), or last_layers:K (the last K layers, "
        "the final norm, the LM head)",
    )
    seed: int = Field(0, ge=0, le=2**31 - 1)
    every: int | None = Field(
        None,
        ge=1,
        le=100_000,
        description="also run these estimators inside every trial on its current policy every this many steps "
        "(metrics probe_tau2, probe_sigma2, probe_kappa, probe_g_star at that step)",
    )


class AnswerSpec(_Strict):
    """``groupscale answer``: the budget of the cheap answer (sweeps.answer) and the pass-rate rule it is compared with."""

    budget: int | None = Field(
        None, ge=1, le=10**12, description="sampled completions it may spend (default: 1% of the grid this spec describes)"
    )
    epsilon: float = Field(
        0.05, gt=0, lt=1, description="eps of the pass-rate rule G >= 1 / (8 eps p (1 - p)) (arXiv 2607.00152), for its regret"
    )


class ResourcesSpec(_Strict):
    gpus_per_trial: float = Field(0, ge=0, le=64, description="0, a fraction (trials share a GPU) or 1; a trial uses one GPU")
    cpus_per_trial: float = Field(1, gt=0, le=256)

    @field_validator("gpus_per_trial")
    @classmethod
    def _one_gpu(cls, v: float) -> float:
        if v > 1:
            raise ValueError(
                f"gpus_per_trial={v:g}: a trial runs on one GPU (it would reserve {v:g} and use 1); "
                "allowed: 0 to 1 (a fraction shares a GPU between trials)"
            )
        return v


class AdaptiveSpec(_Strict):
    """``mode: adaptive``: an Optuna study chooses the next (G, B) from the allowed grid until the
    95% interval of G* is narrower than ``tolerance`` x G* (with at least ``initial_points`` distinct G
    and enough replicate degrees of freedom, sweeps.adaptive) or ``max_trials`` trials were asked."""

    max_trials: int = Field(24, ge=3, le=10_000, description="trial budget of the adaptive search")
    initial_points: int = Field(
        6,
        ge=3,
        le=64,
        description="distinct G of the initial design, spread over group_sizes (4 at least; with 4 the 95% interval "
        "covered the true G* in 33 of 40 runs of bench/adaptive_vs_grid.py, with 6 in 38 of 40)",
    )
    tolerance: float = Field(0.5, gt=0, le=10, description="stop when the G* interval width <= tolerance x G*")
    parallel: int = Field(2, ge=1, le=256, description="adaptive trials in flight at once")
    seed: int = Field(0, ge=0, le=2**31 - 1, description="seed of the sampler's tie-breaks")

    def initial_group_sizes(self, n_groups: int) -> int:
        """Distinct G of the initial design from ``n_groups`` allowed: initial_points, but at least the
        4 the law needs (sweeps.law: 3 parameters and a residual degree of freedom)."""
        return min(max(self.initial_points, 4), n_groups)


class TuneLRSpec(_Strict):
    """``tune_lr``: before the sweep proper, a short Optuna search of the learning rate at every
    (G, B) (log-uniform on [low, high], bad trials pruned early); the sweep's trials then use the
    best lr found for their (G, B)."""

    low: float = Field(..., gt=0, le=1000.0, description="smallest learning rate tried")
    high: float = Field(..., gt=0, le=1000.0, description="largest learning rate tried (> low)")
    trials: int = Field(8, ge=2, le=200, description="learning rates tried per (G, B)")
    steps: int | None = Field(None, ge=1, le=1_000_000, description="steps of each tuning trial (default: steps / 4)")

    @model_validator(mode="after")
    def _ordered(self) -> TuneLRSpec:
        if self.high <= self.low:
            raise ValueError(f"tune_lr.high ({self.high}) must be greater than tune_lr.low ({self.low})")
        return self


class SweepSpec(_Strict):
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
    engine: Literal["groupscale", "trl"] = Field(
        "groupscale", description="who trains each trial: groupscale's GRPO trainer, or TRL's GRPOTrainer on the trl: recipe"
    )
    trl: dict[str, Any] | None = Field(
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
            raise ValueError(
                f"task {task.name!r} needs "
                + (
                    "model: {preset: tabular}"
                    if task.name == "bandit"
                    else "a language model (preset tiny-llama, chat-tiny or a path)"
                )
            )
        if v.lora is not None and v.preset == "tabular":
            raise ValueError("model.lora adapts a language model; the tabular policy of task bandit has no layers to adapt")
        if task.name == "dataset" and v.preset == "tiny-llama":
            raise ValueError(
                "preset tiny-llama is built for a task's character vocabulary; with task dataset use "
                "preset chat-tiny or model.path"
            )
        return v

    @field_validator("measure")
    @classmethod
    def _measure_fits_task(cls, v: MeasureSpec, info: ValidationInfo) -> MeasureSpec:
        task = info.data.get("task")
        if v.kind == "gradient_mse" and not getattr(task, "exact_expected_reward", True):
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
            bad = [g for g in v if b % g]
            if bad:
                raise ValueError(
                    f"group size(s) {', '.join(map(str, bad))} do not divide samples_per_step {b}; "
                    f"valid group sizes for B={b}: {', '.join(map(str, valid_group_sizes(b)))}"
                )
        return sorted(v)

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

    @field_validator("trl")
    @classmethod
    def _engine_fits(cls, v: dict[str, Any] | None, info: ValidationInfo) -> dict[str, Any] | None:
        data = info.data
        if data.get("engine") != "trl":
            if v is not None:
                raise ValueError(
                    "trl: holds GRPOConfig fields for engine trl; set engine: trl, or use grpo: (groupscale's names)"
                )
            return v
        task, measure, grpo = data.get("task"), data.get("measure"), data.get("grpo")
        # settings that differ from groupscale's defaults (a stored spec holds every field, at its default)
        changed = sorted(k for k, v in (grpo or GRPOSpec()).model_dump().items() if v != GRPOSpec.model_fields[k].default)
        refused = [
            (getattr(task, "name", None) == "bandit", "task bandit (a tabular policy; TRL trains language models)"),
            (measure is not None and measure.kind != "outcome", "measure.kind gradient_mse (it measures groupscale's estimator)"),
            (data.get("tune_lr") is not None, "tune_lr (set learning_rate in trl:)"),
            (bool(changed), f"grpo: {changed} (TRL reads trl:)"),
        ]
        for bad, what in refused:
            if bad:
                raise ValueError(f"engine trl does not take {what}; the recipe goes in trl:, in TRL's names")
        from sweeps.trl_steps import structure_for

        for b in data.get("samples_per_step") or ():
            structure_for(v or {}, b)  # a ValueError names the field and the allowed budgets
        return v

    @property
    def one_process_per_trial(self) -> bool:
        """Trials that vLLM generates for run in a worker process of their own (vLLM does not give GPU memory back
        inside a process), so no warm worker takes the next one."""
        return self.engine == "trl" and str(self.trl_recipe.get("use_vllm", False)).lower() == "true"

    @property
    def trl_recipe(self) -> dict[str, Any]:
        """The trl: section (empty for TRL's defaults)."""
        return dict(self.trl or {})

    def with_paths_from(self, base: Path) -> SweepSpec:
        """The spec with relative file paths (task data, reward files found there, model folder) made absolute
        from ``base`` (a spec file's folder), so a spec travels with its files. Absolute paths are kept as they
        are, and so is a relative reward file that is not under ``base`` (the server resolves it against
        GROUPSCALE_REWARD_ROOT)."""

        def absolute(path: str | None) -> str | None:
            return None if path is None or Path(path).expanduser().is_absolute() else str((base / path).resolve())

        task, model = self.task, self.model
        if isinstance(task, JsonlTaskSpec | DatasetTaskSpec):
            update: dict[str, Any] = {k: absolute(getattr(task, k, None)) for k in ("path", "eval_path")}
            if isinstance(task, DatasetTaskSpec):
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


class _UniqueKeyLoader(yaml.SafeLoader):
    """safe_load that refuses duplicate keys (YAML would silently keep the last one)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise ValueError(f"duplicate key {key!r} (line {key_node.start_mark.line + 1})")
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def load_spec(path: str | Path) -> SweepSpec:
    """Read a YAML or JSON spec file (YAML is a superset of JSON; no tags, no duplicate keys). Relative
    file paths in it are relative to the file's folder (SweepSpec.with_paths_from).

    Raises:
        yaml.YAMLError: not YAML, or a tag.
        ValueError: a duplicate key, or not a mapping.
        OSError: the file cannot be read.
        pydantic.ValidationError: the mapping is not a valid spec.
    """
    data = yaml.load(Path(path).read_text(), Loader=_UniqueKeyLoader)  # a SafeLoader subclass
    if not isinstance(data, dict):
        raise ValueError(f"a spec is a YAML mapping, got {type(data).__name__}")
    return SweepSpec.model_validate(data).with_paths_from(Path(path).resolve().parent)


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models an annotation can hold (through Annotated, unions, lists and dicts)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models_in(arg)]


def error_message(error: Any) -> str:
    """A pydantic error's message for people: an unknown field gets unknown_field_message."""
    loc = [p for p in error.get("loc", ()) if p != "body"]
    if error.get("type") == "extra_forbidden":
        return unknown_field_message(loc) or str(error.get("msg", ""))
    return str(error.get("msg", ""))


def unknown_field_message(loc: tuple | list) -> str | None:
    """For an ``extra_forbidden`` error at ``loc`` (a SweepSpec path, its last item the unknown key): the
    allowed fields there and the closest ones ("did you mean temperature?"); None when loc is not a
    path into SweepSpec."""
    *parents, key = list(loc) or [None]
    models: list[type[BaseModel]] = [SweepSpec]
    for part in parents:
        if isinstance(part, int):  # a list index: the models stay those of the list's items
            continue
        tagged = [m for m in models if part in typing.get_args(m.model_fields.get("name", Field()).annotation)]
        if tagged:  # a discriminated union's tag (task: arithmetic, dataset, ...)
            models = tagged
            continue
        fields = [m.model_fields[part] for m in models if part in m.model_fields]
        models = [sub for f in fields for sub in _models_in(f.annotation)]
        if not models:
            return None
    if len(models) != 1 or not isinstance(key, str):
        return None
    allowed = list(models[0].model_fields) + (list(TRL_ALIASES) if models[0] is GRPOSpec else [])
    close = difflib.get_close_matches(key, allowed, n=2, cutoff=0.6)
    hint = f" (did you mean {' or '.join(close)}?)" if close else ""
    return f"unknown field {key!r}{hint}; allowed: {', '.join(allowed)}"

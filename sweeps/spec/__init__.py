"""The sweep spec: one pydantic model validates YAML files, JSON bodies and CLI input alike.

A sweep trains GRPO at every group size G in ``group_sizes`` under every budget B in
``samples_per_step`` (B = N * G completions per optimizer step, N = B / G prompts), for every seed.
Validation happens here, before anything is scheduled; every error names the field and what is
allowed (DESIGN.md, "Requirements that hold everywhere").

One section per module: base (names, limits, the strict model), task, model, grpo (with TRL's aliases),
sections (eval, measure, probe, answer, resources, adaptive, tune_lr), sweep (SweepSpec), loading (files
and error messages). Everything public is importable from ``sweeps.spec``.
"""

import sweeps.engines  # registers every engine the spec validates against (ENGINES)
from sweeps.spec.base import (
    ADVANTAGE_NAMES,
    DTYPE_NAMES,
    ENGINES,
    FUNCTION_PATTERN,
    LOSS_AGGREGATION_NAMES,
    MAX_COMPLETION_TOKENS,
    MAX_GROUP_SIZE,
    MAX_SAMPLES_PER_STEP,
    OPTIMIZER_NAMES,
    PRESET_NAMES,
    REWARD_NAMES,
    TASK_NAMES,
    TEMPLATE_ARGUMENTS,
    StrictModel,
    get_engine,
)
from sweeps.spec.grpo import TRL_ALIASES, TRL_LOSS_TYPES, TRL_SCALE_REWARDS, GRPOSpec
from sweeps.spec.loading import error_message, load_spec, unknown_field_message
from sweeps.spec.model import LoraSpec, ModelSpec
from sweeps.spec.sections import AdaptiveSpec, AnswerSpec, EvalSpec, MeasureSpec, ProbeSpec, ResourcesSpec, TuneLRSpec
from sweeps.spec.sweep import SweepSpec, valid_group_sizes
from sweeps.spec.task import DEFAULT_EVAL_FRACTION, ArithmeticTaskSpec, BanditTaskSpec, DatasetTaskSpec, JsonlTaskSpec, RewardSpec

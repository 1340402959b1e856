"""A TRL GRPO recipe (the YAML ``trl grpo --config`` reads, open-r1's ``recipes/*/grpo/config_*.yaml``, or a
``GRPOConfig.to_dict()`` dump) as a sweep spec: under ``engine: trl`` the recipe itself, else translated.

``engine: trl`` (the default) keeps every GRPOConfig field of the recipe under ``trl:`` as it is written, so nothing
changes meaning; a sweep only owns G, B, T and where a trial writes (SWEEP_OWNED). B is the recipe's generation
batch as TRL computes it on the recipe's number of processes (sweeps.trl_steps); a ``generation_batch_size`` is
kept as the ``steps_per_generation`` it gives there, so the optimizer steps per generation stay the recipe's.
``engine: groupscale`` translates what groupscale's trainer has and lists the rest. The keys of the recipe that are
not GRPOConfig fields (TRL's ModelConfig and ScriptArguments: the model, the dataset, the reward functions) go to
``model:`` where groupscale has the setting, else to the notes. Strings such as ``1e-6`` (YAML 1.1) are numbers,
as in TRL's parser.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from sweeps.engines import get_engine
from sweeps.engines.trl import TRL_DEFAULTS, grpo_config_fields
from sweeps.spec import TRL_ALIASES, GRPOSpec, valid_group_sizes
from sweeps.spec.sections import MAX_PROCESSES
from sweeps.trl_steps import StepStructure, recipe_structure, trl_value

# GRPOConfig fields a sweep owns: its trials set them (engine trl) or they would publish or evaluate elsewhere.
SWEEP_OWNED = {
    "num_generations": "G: --group-sizes",
    "generation_batch_size": "B: samples_per_step (kept as steps_per_generation)",
    "max_steps": "T: steps",
    "seed": "seeds",
    "output_dir": "each trial's checkpoint folder",
    "logging_steps": "every step is logged to MLflow",
    "report_to": "MLflow, through groupscale",
    "save_steps": "checkpoint_every",
    "save_strategy": "checkpoint_every",
    "save_total_limit": "a trial keeps its last complete checkpoint alone (what resume needs)",
    "save_only_model": "a trial's checkpoint holds what resume needs, the optimizer state too",
    "restore_callback_states_from_checkpoint": "a trial restores its own counts from its checkpoint",
    "resume_from_checkpoint": "a trial resumes from its own checkpoint",
    "overwrite_output_dir": "each trial's checkpoint folder",
    "reward_weights": "each task.rewards entry's weight, in order: set weight: on each",
    "push_to_hub": "a sweep's trials are not published",
    "hub_model_id": "a sweep's trials are not published",
    "hub_strategy": "a sweep's trials are not published",
    "hub_private_repo": "a sweep's trials are not published",
    "run_name": "MLflow names each trial's run",
    "do_eval": "groupscale's held-out eval: eval.every",
    "eval_strategy": "groupscale's held-out eval: eval.every",
    "eval_steps": "groupscale's held-out eval: eval.every",
    "use_cpu": "resources.gpus_per_trial",
    "num_processes": "resources.num_processes: each trial trains on these processes, B its generation batch there",
}
# Keys of TRL's ModelConfig / ScriptArguments (and open-r1's) that name what a spec holds elsewhere.
ELSEWHERE = {
    "dataset_name": "a hub dataset id: groupscale reads local files only; set task.path",
    "dataset_config": "set task.path (and task.split)",
    "dataset_train_split": "task.split of a save_to_disk folder",
    "dataset_test_split": "task.eval_path, or task.eval_fraction",
    "reward_funcs": "set task.rewards to FILE.py:NAME entries (open-r1's and TRL's reward files load unchanged)",
    "system_prompt": "groupscale does not add a system message: put it first in each row's prompt messages",
    "chat_template": "put the template in the model folder (chat_template.jinja); groupscale renders with it",
}
DTYPES = {"bfloat16": "bfloat16", "float32": "float32", "auto": "auto"}
RLOO_ONLY = {"normalize_advantages", "reward_clip_range"}  # fields of TRL's RLOOConfig that GRPOConfig lacks (TRL 1.16)


def _steps(config: dict[str, Any]) -> int | None:
    value = trl_value(config.get("max_steps"))
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"max_steps: {config.get('max_steps')!r} is not a whole number")
    return value if value > 0 else None


def _check_group_sizes(group_sizes: list[int], budget: int, structure: StepStructure) -> None:
    """--group-sizes are distinct, >= 2 and divide B (the recipe's ``structure`` says how B came about). Raises
    ValueError naming the allowed G."""
    if not group_sizes or len(set(group_sizes)) != len(group_sizes) or min(group_sizes) < 2:
        raise ValueError(f"--group-sizes: {group_sizes} must be distinct whole numbers >= 2 (e.g. 2,4,8,16)")
    allowed = valid_group_sizes(budget)
    bad = [g for g in group_sizes if g not in allowed]
    if bad:
        raise ValueError(
            f"group sizes {bad} do not divide B = {budget}: {structure.describe()}; allowed: "
            + (", ".join(map(str, allowed)) if allowed else "none (no group of 2 or more fits); raise "
               "per_device_train_batch_size to the largest G at least (Unsloth does so itself) or set generation_batch_size")
        )  # fmt: skip


def _check_processes(group_sizes: list[int], budget: int, num_processes: int) -> None:
    """What resources.num_processes would refuse, said by from-trl (its spec could not be submitted otherwise): each
    process trains whole groups (B / G >= num_processes). Raises ValueError."""
    few = [g for g in group_sizes if budget // g < num_processes]
    if few:
        raise ValueError(
            f"group sizes {few} give fewer groups than the {num_processes} processes at B = {budget}: each process trains "
            f"whole groups; allowed: G up to {budget // num_processes}"
        )


def spec_from_trl(
    config: dict[str, Any],
    group_sizes: list[int],
    seeds: int = 3,
    steps: int | None = None,
    model: str | None = None,
    engine: str = "trl",
    num_processes: int = 1,
    grpo_fields: Collection[str] | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """A sweep spec (plain data, for SweepSpec.model_validate) from a TRL GRPO recipe, and notes on what it did not keep.

    Args:
        config: the recipe (YAML mapping) or a GRPOConfig dump; group_sizes: the G to sweep, each dividing B.
        seeds: seeds per (G, B); steps: T (default: the recipe's max_steps when > 0, else 200); model: a local model
            folder (default: the recipe's model_name_or_path).
        engine: ``trl`` (the recipe under ``trl:``) or ``groupscale`` (translated into ``grpo:``).
        num_processes: the processes the recipe trains on (accelerate's num_processes; the recipe's own num_processes
            when this is 1): B is its generation batch there.
        grpo_fields: the GRPOConfig field names that go under ``trl:`` (engine trl; default: the installed TRL's).
    Returns (spec dict, notes "key: value (why)"); the task is left for the user to fill (a data file, FILE.py:NAME).
    Raises:
        ValueError: no model, a G that does not divide B, batch settings TRL refuses, a value groupscale refuses
            (engine groupscale), each naming the key and the value.
    """
    _not_rloo(config)
    try:
        keeps_recipe = get_engine(engine).section == "trl"  # TRL's engine trains the recipe itself
    except ValueError as e:
        raise ValueError(f"--engine: {e}") from None
    num_processes = _processes(config, num_processes)
    from_recipe = model is None
    model = model or config.get("model_name_or_path")
    if not model:
        raise ValueError("the TRL config names no model (model_name_or_path): pass --model with a local model folder")
    structure = recipe_structure({k: trl_value(config[k]) for k in _BATCH if config.get(k) is not None}, num_processes)
    budget = _budget(structure, group_sizes, keeps_recipe, num_processes)
    spec: dict[str, Any] = {
        "name": f"from-trl-{str(model).rstrip('/').split('/')[-1]}",
        "engine": engine,
        "task": {
            "name": "dataset",
            "path": "FILL IN: a local data file (jsonl, parquet, ...)",
            "prompt_column": "prompt",
            "prompt_format": "raw",  # TRL gives a string prompt to the model as it is (it templates message lists)
            "rewards": [{"function": "FILL IN: rewards.py:NAME"}],
        },
        "model": {"path": str(model), **_model_settings(config)},
        "group_sizes": sorted(group_sizes),
        "samples_per_step": [budget],
        "seeds": list(range(seeds)),
        "steps": steps or _steps(config) or 200,
        "answer": {"baseline_group_size": _recipe_group_size(config)},  # an answer keeps the recipe's G or moves
        **({"resources": {"num_processes": num_processes}} if num_processes > 1 else {}),  # trials on the recipe's processes
    }
    if keeps_recipe:
        notes = as_recipe(config, spec, structure, grpo_config_fields() if grpo_fields is None else grpo_fields)
    else:
        notes = translated(config, spec, structure)
    return spec, notes + _other_notes(config, group_sizes, str(model), from_recipe)


def _budget(structure: StepStructure, group_sizes: list[int], keeps_recipe: bool, num_processes: int) -> int:
    """B: the recipe's generation batch, which TRL's engine trains as the recipe splits it and groupscale's in its k
    optimizer steps (grpo.steps_per_generation), each of whole groups; a recipe of several generations a step (k = 1/n)
    is each optimizer step's completions on groupscale's engine. Raises ValueError for group sizes that do not fit."""
    k = structure.optimizer_steps_per_generation
    budget = structure.generation_batch_size if keeps_recipe or k.denominator == 1 else structure.completions_per_optimizer_step
    per_step = budget if keeps_recipe else structure.completions_per_optimizer_step  # whole groups in each step
    _check_group_sizes(group_sizes, per_step, structure)
    _check_processes(group_sizes, per_step, num_processes)
    return budget


def _not_rloo(config: dict[str, Any]) -> None:
    """Raises ValueError for an RLOOConfig recipe (RLOO_ONLY fields): another objective than GRPOTrainer's."""
    rloo = sorted(set(config) & RLOO_ONLY)
    if rloo:
        raise ValueError(
            f"{', '.join(rloo)}: an RLOOConfig recipe (trl rloo), not a GRPOConfig one: TRL's RLOOTrainer clips the ratio of "
            "a completion's summed log-probabilities and puts its KL in the reward, which GRPOTrainer and groupscale do "
            "not train; sweep a GRPOConfig recipe, or groupscale's grpo: advantage loo (the leave-one-out baseline)"
        )


def _processes(config: dict[str, Any], num_processes: int) -> int:
    """The processes the recipe trains on: ``num_processes``, or the recipe's own when that is 1 (`trl grpo --config`
    passes num_processes to accelerate). Raises ValueError outside 1 to MAX_PROCESSES."""
    recipe_processes = trl_value(config.get("num_processes"))
    if num_processes == 1 and isinstance(recipe_processes, int) and recipe_processes > 1:
        num_processes = recipe_processes
    if not 1 <= num_processes <= MAX_PROCESSES:
        raise ValueError(f"--num-processes: {num_processes}; allowed: 1 to {MAX_PROCESSES} (resources.num_processes)")
    return num_processes


def _other_notes(config: dict[str, Any], group_sizes: list[int], model: str, from_recipe: bool) -> list[str]:
    """The notes on what a spec holds elsewhere (ELSEWHERE), a model folder that is not here, the recipe's own G."""
    notes = [f"{k}: {config[k]!r} ({why})" for k, why in ELSEWHERE.items() if k in config]
    if from_recipe and not Path(model).expanduser().is_dir():
        notes.append(
            f"model_name_or_path: {model!r} is not a local folder here: groupscale never downloads weights; download it "
            f"(e.g. `hf download {model} --local-dir DIR`) and pass --model DIR, or set model.path"
        )
    recipe_g = trl_value(config.get("num_generations"))
    if isinstance(recipe_g, int) and recipe_g not in group_sizes:
        notes.append(f"num_generations: {recipe_g} (the recipe's own G is not among --group-sizes; add it to compare)")
    return notes


def _recipe_group_size(config: dict[str, Any]) -> int:
    """The G the recipe trains with: num_generations (GRPOConfig's default 8).

    Raises:
        ValueError: it is not a whole number >= 2, naming the key.
    """
    value = trl_value(config.get("num_generations", 8))
    if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value) or value < 2:
        raise ValueError(f"num_generations: {value!r} is not a group size; allowed: a whole number >= 2")
    return int(value)


_BATCH = ("per_device_train_batch_size", "gradient_accumulation_steps", "steps_per_generation", "generation_batch_size")
_MODEL_KEYS = ("model_name_or_path", "torch_dtype", "dtype", "attn_implementation", "use_peft", "lora_r", "lora_alpha",
               "lora_dropout", "lora_target_modules", "trust_remote_code", "model_revision")  # fmt: skip


def _model_settings(config: dict[str, Any]) -> dict[str, Any]:
    """model: settings from TRL's ModelConfig keys (dtype, attention, LoRA)."""
    out: dict[str, Any] = {}
    dtype = config.get("torch_dtype", config.get("dtype"))
    if dtype in DTYPES:
        out["dtype"] = DTYPES[dtype]
    if config.get("attn_implementation") in ("eager", "sdpa", "flash_attention_2", "flex_attention"):
        out["attn_implementation"] = config["attn_implementation"]
    if str(config.get("use_peft", False)).lower() == "true":
        lora = {"r": trl_value(config.get("lora_r", 16)), "alpha": float(trl_value(config.get("lora_alpha", 32)))}
        lora["dropout"] = float(trl_value(config.get("lora_dropout", 0.05)))
        targets = config.get("lora_target_modules")
        lora["target_modules"] = targets if isinstance(targets, list) else "all-linear"
        out["lora"] = lora
    return out


def _model_notes(config: dict[str, Any], kept: dict[str, Any]) -> list[str]:
    notes = []
    dtype = config.get("torch_dtype", config.get("dtype"))
    if dtype is not None and "dtype" not in kept:
        notes.append(f"torch_dtype: {dtype!r} (model.dtype allows auto, bfloat16, float32)")
    if config.get("trust_remote_code"):
        notes.append("trust_remote_code: groupscale never runs a model folder's code")
    if config.get("model_revision") not in (None, "main"):
        notes.append(f"model_revision: {config['model_revision']!r} (model.path is a local folder of that revision)")
    return notes


def as_recipe(config: dict[str, Any], spec: dict[str, Any], structure: Any, grpo_fields: Collection[str]) -> list[str]:
    """engine trl: the recipe's GRPOConfig fields under trl:, but for what a sweep owns; notes on the rest."""
    trl = {k: v for k, v in config.items() if k in grpo_fields and k not in SWEEP_OWNED}
    if config.get("generation_batch_size") is not None:  # kept as the steps it gives on the recipe's processes
        trl["steps_per_generation"] = structure.steps_per_generation
    spec["trl"] = trl
    notes = [f"{k}: {config[k]!r} (set by the sweep: {why})" for k, why in SWEEP_OWNED.items() if k in config]
    other = [k for k in config if k not in grpo_fields and k not in {*ELSEWHERE, *_MODEL_KEYS, *SWEEP_OWNED}]
    notes += [f"{k}: {config[k]!r} (not a field of TRL's GRPOConfig; a recipe script's own setting)" for k in other]
    return notes + _model_notes(config, spec["model"])


def translated(config: dict[str, Any], spec: dict[str, Any], structure: Any) -> list[str]:
    """engine groupscale: the recipe's settings in groupscale's names, with TRL's defaults where it names none; notes
    on what groupscale's trainer has no setting for. Raises ValueError for a value it refuses, naming the key."""
    grpo: dict[str, Any] = {k: TRL_DEFAULTS[k] for k in ("loss_type", "scale_rewards")}  # TRL's: the same objective
    for key in (*TRL_ALIASES, "temperature", "max_grad_norm", "gradient_checkpointing"):
        if config.get(key) is not None:
            grpo[key] = trl_value(config[key])
    for key, value in list(grpo.items()):
        try:  # an invalid value, or a TRL setting groupscale does not run, would change the objective: refused
            GRPOSpec.model_validate({key: value})
        except ValidationError as e:
            raise ValueError(f"{key}: {config.get(key, value)!r}: {e.errors()[0]['msg'].removeprefix('Value error, ')}") from None
    spec["grpo"] = GRPOSpec.model_validate(grpo).model_dump(include={TRL_ALIASES.get(k, k) for k in grpo})
    kept = {*TRL_ALIASES, "temperature", "max_grad_norm", "gradient_checkpointing", *_BATCH, *_MODEL_KEYS, *ELSEWHERE}
    notes = []
    k = structure.optimizer_steps_per_generation
    if k > 1 and k.denominator == 1:  # groupscale's engine trains TRL's k optimizer steps per generation as they are
        spec["grpo"]["steps_per_generation"] = int(k)
    elif k != 1:
        notes.append(
            f"steps_per_generation: {structure.steps_per_generation} ({structure.optimizer_steps_per_generation} optimizer "
            f"steps per generation in TRL; groupscale samples each step's {structure.completions_per_optimizer_step} "
            "completions fresh: B is that; engine trl keeps TRL's structure)"
        )
    if config.get("reward_weights") is not None:
        notes.append(f"reward_weights: {config['reward_weights']!r} (set each task.rewards entry's weight, in order)")
        kept.add("reward_weights")
    if str(config.get("mask_truncated_completions", False)).lower() == "true":
        notes.append("mask_truncated_completions: refused (groupscale trains on truncated completions; engine trl keeps it)")
    kept |= {"mask_truncated_completions", "num_generations", "max_steps", "num_processes"}
    notes += [
        f"{k}: {config[k]!r} (groupscale's trainer has no such setting; engine trl keeps it)" for k in config if k not in kept
    ]
    return notes + _model_notes(config, spec["model"])

"""How TRL reads a recipe's values (``trl_value``), how its GRPOTrainer splits a generation batch of B completions into
optimizer steps, and the settings that give a recipe's step structure at another B or on another number of processes.

TRL 1.16 (``GRPOConfig.__post_init__``): a generation batch holds ``generation_batch_size`` completions
= ``per_device_train_batch_size`` x processes x ``steps_per_generation``; each of its ``steps_per_generation``
micro-steps feeds one ``per_device_train_batch_size`` batch per process, and ``gradient_accumulation_steps``
micro-steps make one optimizer step. So one generation gives k = ``steps_per_generation / gradient_accumulation_steps``
optimizer steps, each over B / k completions, and ``num_iterations`` passes repeat them. k need not be whole: TRL's
paper-index recipes (DeepSeekMath, Lite PPO) take k = 1/8 and 1/4, several generations per optimizer step, and
k = 3/2 has optimizer steps that straddle two generations. A recipe that sets neither ``generation_batch_size`` nor
``steps_per_generation`` gets ``steps_per_generation`` = ``gradient_accumulation_steps``: one on-policy optimizer
step per generation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

TRL_PER_DEVICE_DEFAULT = 8  # GRPOConfig.per_device_train_batch_size


@dataclass(frozen=True)
class StepStructure:
    """One generation batch of ``generation_batch_size`` completions as TRL trains on it.

    optimizer_steps_per_generation: k = steps_per_generation / gradient_accumulation_steps, the optimizer steps
        each generation batch feeds (per pass): a whole number, or a fraction (1/4: four generations per step);
    num_iterations: passes over each generation batch (TRL's mu); the other fields are GRPOConfig's.
    """

    generation_batch_size: int
    per_device_train_batch_size: int
    gradient_accumulation_steps: int
    num_processes: int
    optimizer_steps_per_generation: Fraction
    num_iterations: int = 1

    @property
    def steps_per_generation(self) -> int:
        return self.generation_batch_size // (self.per_device_train_batch_size * self.num_processes)

    @property
    def completions_per_optimizer_step(self) -> int:
        """The law's B: completions in one gradient estimate (generation_batch_size / k)."""
        return self.per_device_train_batch_size * self.num_processes * self.gradient_accumulation_steps

    @property
    def generation_cycle(self) -> int:
        """Optimizer steps from one point where a generation and an optimizer step both start to the next: TRL generates
        every steps_per_generation x num_iterations micro-steps and steps every gradient_accumulation_steps, so the two
        meet every lcm of those micro-steps. A checkpoint inside a cycle would generate again on resume."""
        micro = math.lcm(self.steps_per_generation * self.num_iterations, self.gradient_accumulation_steps)
        return micro // self.gradient_accumulation_steps

    def config(self) -> dict[str, int]:
        """The GRPOConfig fields that give this structure (steps_per_generation follows from them in TRL)."""
        return {
            "generation_batch_size": self.generation_batch_size,
            "per_device_train_batch_size": self.per_device_train_batch_size,
            "gradient_accumulation_steps": self.gradient_accumulation_steps,
        }

    def describe(self) -> str:
        passes = f", {self.num_iterations} passes" if self.num_iterations > 1 else ""
        k, step = self.optimizer_steps_per_generation, self.completions_per_optimizer_step
        if k.numerator == 1 and k.denominator > 1:
            shape = f"each optimizer step takes {k.denominator} generations of {self.generation_batch_size} completions ({step})"
        else:
            shape = f"each generation of {self.generation_batch_size} completions feeds {k} optimizer step(s) of {step}"
        return (
            f"{shape}{passes} (per_device_train_batch_size {self.per_device_train_batch_size} x {self.num_processes} process(es) "
            f"x gradient_accumulation_steps {self.gradient_accumulation_steps}, steps_per_generation {self.steps_per_generation})"
        )


def trl_value(value: Any) -> Any:
    """A YAML 1.1 string as TRL's parser reads it: ``1e-6`` the number, ``true``/``false`` booleans; anything else as
    it is. The one reading of a recipe's values (the spec's checks, the trial's GRPOConfig, the exports)."""
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    if isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return value
        return int(number) if number.is_integer() and "." not in value and "e" not in value.lower() else number
    return value


def _int(recipe: dict[str, Any], key: str, default: int | None) -> int | None:
    """recipe[key] as a whole number >= 1 (read by trl_value), else default when absent.

    Raises:
        ValueError: naming the key and the value.
    """
    value = recipe.get(key)
    if value is None:
        return default
    number = trl_value(value)
    if isinstance(number, bool) or not isinstance(number, int | float) or not float(number).is_integer() or number < 1:
        raise ValueError(f"trl.{key}: {value!r} is not a whole number >= 1")
    return int(number)


def recipe_structure(recipe: dict[str, Any], num_processes: int = 1) -> StepStructure:
    """The step structure a TRL recipe (GRPOConfig fields) has on ``num_processes`` processes, with TRL's defaults.

    Raises:
        ValueError: TRL would refuse the recipe (both generation_batch_size and steps_per_generation, a generation
            batch that is not a whole number of global batches), naming the fields.
    """
    per_device = _int(recipe, "per_device_train_batch_size", TRL_PER_DEVICE_DEFAULT) or TRL_PER_DEVICE_DEFAULT
    accumulation = _int(recipe, "gradient_accumulation_steps", 1) or 1
    gbs, spg = _int(recipe, "generation_batch_size", None), _int(recipe, "steps_per_generation", None)
    global_batch = per_device * num_processes
    if gbs is not None and spg is not None:
        raise ValueError("trl: generation_batch_size and steps_per_generation cannot both be set (TRL refuses it)")
    if gbs is not None:
        if gbs % global_batch:
            raise ValueError(f"trl.generation_batch_size ({gbs}) must be divisible by the global batch size ({global_batch})")
        spg = gbs // global_batch
    spg = accumulation if spg is None else spg
    k = Fraction(spg, accumulation)
    return StepStructure(global_batch * spg, per_device, accumulation, num_processes, k, _int(recipe, "num_iterations", 1) or 1)


def structure_for(recipe: dict[str, Any], samples_per_step: int, num_processes: int = 1) -> StepStructure:
    """The recipe's optimizer steps per generation (k = p/q in lowest terms) and passes, at a generation batch of
    B = ``samples_per_step`` completions on ``num_processes`` (P) processes.

    TRL needs B = per_device x P x steps_per_generation and k = steps_per_generation / gradient_accumulation_steps,
    so steps_per_generation = p m and gradient_accumulation_steps = q m for a whole m, with per_device x m = B / (P p):
    per_device is the recipe's where it divides B / (P p) (memory), else the largest number below it that does.

    Raises:
        ValueError: the recipe is refused (recipe_structure), or B / (P p) is not a whole number, naming the
            allowed budgets (multiples of P p).
    """
    k = recipe_structure(recipe, 1).optimizer_steps_per_generation
    per_process, left = divmod(samples_per_step, num_processes * k.numerator)  # per_device x m
    if left:
        raise ValueError(
            f"samples_per_step {samples_per_step} cannot feed the recipe's {k} optimizer step(s) per generation on "
            f"{num_processes} process(es): allowed, multiples of {k.numerator * num_processes}"
        )
    wanted = _int(recipe, "per_device_train_batch_size", per_process) or per_process
    per_device = max(d for d in range(1, min(wanted, per_process) + 1) if per_process % d == 0)
    m = per_process // per_device
    return StepStructure(
        samples_per_step, per_device, k.denominator * m, num_processes, k, _int(recipe, "num_iterations", 1) or 1
    )

"""TRL's step structure: what a recipe does with a generation batch, and the settings that keep it at another B,
checked against TRL's own GRPOConfig arithmetic."""

import re
from fractions import Fraction

import pytest

from sweeps.trl_steps import recipe_structure, structure_for

# TRL's docs/source/paper_index.md: the DeepSeekMath and Lite PPO blocks (steps_per_generation below the accumulation)
DEEPSEEKMATH = {"steps_per_generation": 16, "per_device_train_batch_size": 4, "gradient_accumulation_steps": 128}
LITE_PPO = {"per_device_train_batch_size": 4, "gradient_accumulation_steps": 32, "steps_per_generation": 8}


def _trl(**fields):
    from trl import GRPOConfig

    return GRPOConfig(output_dir="unused", use_cpu=True, report_to="none", **fields)


@pytest.mark.parametrize(
    ("recipe", "processes", "gbs", "k"),
    [
        ({}, 1, 8, 1),  # TRL's defaults: per-device 8, one on-policy step per generation
        ({"per_device_train_batch_size": 16, "gradient_accumulation_steps": 4}, 1, 64, 1),
        ({"per_device_train_batch_size": 16, "gradient_accumulation_steps": 4, "steps_per_generation": 8}, 1, 128, 2),
        ({"per_device_train_batch_size": 8, "generation_batch_size": 96, "gradient_accumulation_steps": 3}, 1, 96, 4),
        ({"per_device_train_batch_size": 16, "gradient_accumulation_steps": 4}, 8, 512, 1),  # open-r1's 8 processes
        ({"per_device_train_batch_size": "16", "num_iterations": 2}, 7, 112, 1),
        (DEEPSEEKMATH, 1, 64, Fraction(1, 8)),  # eight generations of 64 per optimizer step of 512
        (LITE_PPO, 1, 32, Fraction(1, 4)),
        ({"per_device_train_batch_size": 2, "gradient_accumulation_steps": 2, "steps_per_generation": 3}, 2, 12, Fraction(3, 2)),
    ],
)
def test_a_recipes_structure_is_trls(recipe, processes, gbs, k):
    got = recipe_structure(recipe, processes)
    assert (got.generation_batch_size, got.optimizer_steps_per_generation) == (gbs, k)
    assert got.completions_per_optimizer_step == gbs / k
    if processes == 1:  # GRPOConfig computes the single-process case itself
        trl = _trl(**{key: int(v) for key, v in recipe.items()})
        assert trl.generation_batch_size == gbs
        assert Fraction(trl.steps_per_generation, trl.gradient_accumulation_steps) == k


@pytest.mark.parametrize(
    ("recipe", "budget"),
    [
        ({}, 16),
        ({"per_device_train_batch_size": 16, "gradient_accumulation_steps": 4, "steps_per_generation": 8}, 64),
        ({"per_device_train_batch_size": 3}, 48),  # 3 divides 48: three-completion micro-batches
        ({"per_device_train_batch_size": 5}, 48),  # 5 does not: the largest divisor below it, 4
        ({"steps_per_generation": 4, "gradient_accumulation_steps": 2, "num_iterations": 2}, 32),
        (DEEPSEEKMATH, 64),  # the recipe's own generation batch: its own settings back
        (DEEPSEEKMATH, 48),
        (LITE_PPO, 8),
        ({"steps_per_generation": 3, "gradient_accumulation_steps": 2}, 24),  # steps straddle generations
    ],
)
def test_the_settings_for_another_budget_keep_the_recipes_steps_per_generation(recipe, budget):
    want = recipe_structure(recipe)
    got = structure_for(recipe, budget)
    trl = _trl(**got.config(), num_iterations=got.num_iterations)
    assert trl.generation_batch_size == budget
    k = Fraction(trl.steps_per_generation, trl.gradient_accumulation_steps)
    assert k == want.optimizer_steps_per_generation == got.optimizer_steps_per_generation
    assert trl.steps_per_generation == got.steps_per_generation
    assert got.completions_per_optimizer_step == budget / k
    assert got.per_device_train_batch_size <= int(recipe.get("per_device_train_batch_size", budget))
    if budget == want.generation_batch_size and "per_device_train_batch_size" in recipe:
        assert got.config() == want.config()  # the recipe's own B gives the recipe's own settings


def test_refusals_name_the_field():
    with pytest.raises(ValueError, match="cannot both be set"):
        recipe_structure({"generation_batch_size": 64, "steps_per_generation": 4})
    with pytest.raises(ValueError, match=r"generation_batch_size \(60\) must be divisible by the global batch size \(8\)"):
        recipe_structure({"generation_batch_size": 60})
    with pytest.raises(ValueError, match="samples_per_step 18 cannot feed the recipe's 3/2 optimizer step.*multiples of 12"):
        structure_for({"steps_per_generation": 3, "gradient_accumulation_steps": 2}, 18, num_processes=4)
    with pytest.raises(ValueError, match="samples_per_step 18 cannot feed the recipe's 4 optimizer step"):
        structure_for({"steps_per_generation": 4}, 18)
    for bad in (2.5, 0, "eight", [16], True):
        with pytest.raises(
            ValueError, match=rf"trl.per_device_train_batch_size: {re.escape(repr(bad))} is not a whole number >= 1"
        ):
            recipe_structure({"per_device_train_batch_size": bad})

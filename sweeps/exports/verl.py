"""``recommend --format verl``: the answer as verl hydra overrides, carrying the loss settings and optimizer steps per
generation the sweep trained with, so the run that uses G trains the objective G was measured for.

Names: verl ``verl/trainer/config/ppo_trainer.yaml`` (actor_rollout_ref.rollout.n, data.train_batch_size counted in
prompts, actor.ppo_mini_batch_size also in prompts, actor.loss_agg_mode, algorithm.norm_adv_by_std_in_grpo,
algorithm.adv_estimator).
"""

from __future__ import annotations

from fractions import Fraction

from sweeps.engines import Recipe
from sweeps.exports.base import Export, ExportError, check_divides, comments, register_export
from sweeps.planner import prompts_per_step
from sweeps.spec import LOSS_AGGREGATION_NAMES, GRPOSpec

TO_VERL_LOSS = {name: name.replace("_", "-") for name in LOSS_AGGREGATION_NAMES}  # verl's loss_agg_mode


@register_export
class VerlExport(Export):
    name = "verl"
    help = "hydra overrides (with the sweep's loss settings)"

    def render(self, group_size: int, samples_per_step: int, recipe: Recipe, header: str, num_processes: int = 1) -> str:
        """Raises ExportError when verl cannot express the objective (no option at fault)."""
        try:
            lines, notes = verl_overrides(group_size, samples_per_step, recipe.grpo, recipe.optimizer_steps_per_generation)
        except ValueError as e:
            raise ExportError(str(e)) from None
        return "\n".join([*comments(header, notes), *lines]) + "\n"


def verl_overrides(
    group_size: int, samples_per_step: int, grpo: GRPOSpec, optimizer_steps_per_generation: Fraction = Fraction(1)
) -> tuple[list[str], list[str]]:
    """verl hydra overrides (``key=value``) for G and B with the sweep's loss settings, and notes.

    verl counts prompts: data.train_batch_size = B / G; ppo_mini_batch_size = B / (G k) makes k optimizer steps per
    batch per epoch (k = 1 for groupscale's trainer; an engine-trl recipe's ``optimizer_steps_per_generation``), and
    ppo_epochs = inner_steps. A recipe with k = 1/n (n generations per optimizer step, all from the same weights) is
    one rollout batch of n B completions and one step in verl, whose mini-batch cannot exceed its batch.

    Raises:
        ValueError: G < 2 or G does not divide B; k is neither whole nor 1/n, or B / (G k) is not a whole number of
            prompts (verl's mini-batches are whole prompts that divide the batch).
    """
    check_divides(group_size, samples_per_step)
    k = optimizer_steps_per_generation
    if k.numerator != 1 and k.denominator != 1:
        raise ValueError(f"{k} optimizer steps per generation: verl's ppo_mini_batch_size must divide data.train_batch_size")
    prompts = prompts_per_step(samples_per_step, group_size) * k.denominator
    if prompts % k.numerator:
        raise ValueError(f"{prompts} prompts per batch do not split into {k} verl mini-batches of whole prompts")
    out = [
        "algorithm.adv_estimator=" + ("rloo" if grpo.advantage == "loo" else "grpo"),
        f"actor_rollout_ref.rollout.n={group_size}",
        f"data.train_batch_size={prompts}",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={prompts // k.numerator}",
        f"actor_rollout_ref.actor.ppo_epochs={grpo.inner_steps}",
        f"actor_rollout_ref.actor.loss_agg_mode={TO_VERL_LOSS[grpo.loss_aggregation]}",
        f"actor_rollout_ref.actor.clip_ratio_low={grpo.clip_eps:g}",
        f"actor_rollout_ref.actor.clip_ratio_high={(grpo.clip_eps_high or grpo.clip_eps):g}",
        f"actor_rollout_ref.rollout.temperature={grpo.temperature:g}",
        f"data.max_response_length={grpo.max_new_tokens}",
    ]
    if grpo.advantage != "loo":
        out.append(f"algorithm.norm_adv_by_std_in_grpo={grpo.advantage == 'mean_std'}")
    if grpo.kl_beta > 0:
        out += [
            "actor_rollout_ref.actor.use_kl_loss=True",
            f"actor_rollout_ref.actor.kl_loss_coef={grpo.kl_beta:g}",
            "actor_rollout_ref.actor.kl_loss_type=low_var_kl",  # k3, the estimator groupscale uses
        ]
    else:
        out.append("actor_rollout_ref.actor.use_kl_loss=False")
    notes = ["actor_rollout_ref.actor.optim.lr is not carried over: a sweep's lr is tuned for its own model"]
    if k.denominator > 1:
        notes.append(f"the recipe's {k.denominator} generations of B = {samples_per_step} per optimizer step are one verl batch")
    if grpo.advantage == "oracle":
        notes.append("advantage 'oracle' (exact expected reward baseline) has no verl estimator: rloo is the closest")
    return out, notes

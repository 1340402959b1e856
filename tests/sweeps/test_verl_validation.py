"""The verl export checked by verl itself: its hydra config composed with the export's overrides and validated by
verl's own ``validate_config`` and config dataclasses (what ``python3 -m verl.trainer.main_ppo`` does before it starts
Ray). Runs where verl is installed (``pip install 'groupscale[verl]'``; verl 0.9.1 installs on CPU); skipped elsewhere."""

import os
from pathlib import Path

import pytest

from sweeps.engines import Recipe
from sweeps.exports import get_export
from sweeps.spec import GRPOSpec

verl = pytest.importorskip("verl")
# what a user's run sets besides the answer (the model, the rollout engine, micro-batches): not the export's keys
INFRA = ["actor_rollout_ref.model.path=Qwen/Qwen3-8B", "actor_rollout_ref.rollout.name=vllm",
         "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2",
         "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=2",
         "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=2"]  # fmt: skip


def verl_validates(overrides: list[str]):
    """verl's composed config after its own checks. Raises what verl raises."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import omega_conf_to_dataclass, validate_config

    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(Path(verl.__file__).parent / "trainer" / "config"), version_base=None):
        config = compose(config_name="ppo_trainer", overrides=[*INFRA, *overrides])
    validate_config(config=config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config))
    omega_conf_to_dataclass(config.algorithm)
    return config


@pytest.mark.parametrize(
    "grpo",
    [
        GRPOSpec(advantage="mean_std", loss_aggregation="seq_mean_token_mean", importance_sampling_level="sequence",
                 clip_eps=3e-4, clip_eps_high=4e-4, steps_per_generation=4),  # GSPO at k = 4
        GRPOSpec(advantage="mean_std", loss_aggregation="token_mean", kl_beta=1e-3, steps_per_generation=4, inner_steps=2),
    ],
)  # fmt: skip
def test_verls_own_validation_accepts_the_export_of_a_gspo_or_k4_sweep_at_the_users_b(grpo):
    text = get_export("verl").render(8, 8192, Recipe(grpo, grpo.steps_per_generation), "h")
    config = verl_validates([line for line in text.splitlines() if not line.startswith("#")])
    actor = config.actor_rollout_ref.actor
    assert (config.actor_rollout_ref.rollout.n, config.data.train_batch_size, actor.ppo_mini_batch_size) == (8, 1024, 256)
    assert actor.policy_loss.loss_mode == ("gspo" if grpo.importance_sampling_level == "sequence" else "vanilla")
    with pytest.raises(Exception, match="ppo_mini_batch_size"):  # verl's check bites: a mini-batch above the batch
        verl_validates(
            [
                *[line for line in text.splitlines() if not line.startswith("#")],
                "actor_rollout_ref.actor.ppo_mini_batch_size=2048",
            ]
        )

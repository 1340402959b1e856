"""TRL and verl translation (sweeps.recipes): recommendation -> GRPOConfig / verl overrides, TRL recipe -> spec."""

import pytest
import yaml

from sweeps.recipes import spec_from_trl, trl_config, trl_settings, verl_overrides
from sweeps.spec import GRPOSpec, SweepSpec

# A recipe written the way TRL's docs write one for `trl grpo --config` (DAPO-style settings).
TRL_CLI_RECIPE = """
model_name_or_path: /models/Qwen2.5-0.5B-Instruct
dataset_name: trl-lib/DeepMath-103K
reward_funcs: [accuracy_reward]
learning_rate: 1.0e-6
per_device_train_batch_size: 8
gradient_accumulation_steps: 4
num_generations: 8
max_completion_length: 1024
beta: 0.0
epsilon: 0.2
epsilon_high: 0.28
loss_type: dapo
scale_rewards: group
max_steps: 500
bf16: true
output_dir: out
"""


def test_the_trl_snippet_builds_a_grpo_config_with_g_and_b(tmp_path):
    trl = pytest.importorskip("trl")
    grpo = GRPOSpec(loss_aggregation="seq_mean_token_sum_norm", advantage="mean", clip_eps=0.25, kl_beta=0.04)
    text = trl_config(4, 48, grpo, header="groupscale: G = 4 at B = 48")
    assert text.startswith("# groupscale: G = 4 at B = 48\n")
    cfg = trl.GRPOConfig(output_dir=str(tmp_path), use_cpu=True, bf16=False, **yaml.safe_load(text))
    assert (cfg.num_generations, cfg.generation_batch_size) == (4, 48)
    assert (cfg.loss_type, cfg.scale_rewards, cfg.epsilon, cfg.beta) == ("dr_grpo", "none", 0.25, 0.04)


@pytest.mark.parametrize(
    "ours, loss_type, scale",
    [
        ({"loss_aggregation": "seq_mean_token_mean", "advantage": "mean_std"}, "grpo", "group"),
        ({"loss_aggregation": "token_mean", "advantage": "mean"}, "dapo", "none"),
        ({"loss_aggregation": "seq_mean_token_sum_norm", "advantage": "loo"}, "dr_grpo", "none"),
    ],
)
def test_trl_settings_map_back_to_the_names_the_spec_accepts(ours, loss_type, scale):
    settings, notes = trl_settings(8, 64, GRPOSpec(**ours))
    assert (settings["loss_type"], settings["scale_rewards"]) == (loss_type, scale)
    again = GRPOSpec.model_validate({"loss_type": loss_type, "scale_rewards": scale})
    assert again.loss_aggregation == ours["loss_aggregation"]
    assert any("G/(G-1)" in n for n in notes) == (ours["advantage"] == "loo")


def test_verl_overrides_count_prompts():
    lines, _ = verl_overrides(4, 48, GRPOSpec(advantage="mean_std", loss_aggregation="token_mean", kl_beta=0.001, inner_steps=2))
    got = dict(line.split("=", 1) for line in lines)
    assert got["actor_rollout_ref.rollout.n"] == "4"
    assert got["data.train_batch_size"] == got["actor_rollout_ref.actor.ppo_mini_batch_size"] == "12"  # B / G prompts
    assert got["actor_rollout_ref.actor.ppo_epochs"] == "2"
    assert got["actor_rollout_ref.actor.loss_agg_mode"] == "token-mean"
    assert got["algorithm.adv_estimator"] == "grpo" and got["algorithm.norm_adv_by_std_in_grpo"] == "True"
    assert got["actor_rollout_ref.actor.kl_loss_coef"] == "0.001" and got["actor_rollout_ref.actor.kl_loss_type"] == "low_var_kl"
    loo = dict(line.split("=", 1) for line in verl_overrides(2, 48, GRPOSpec())[0])
    assert loo["algorithm.adv_estimator"] == "rloo" and loo["actor_rollout_ref.actor.use_kl_loss"] == "False"
    with pytest.raises(ValueError, match="divide"):
        verl_overrides(5, 48, GRPOSpec())


def _runnable(spec: dict) -> SweepSpec:
    """The spec with its FILL-IN task replaced by a built-in one, as a user would fill it."""
    return SweepSpec.model_validate({**spec, "task": {"name": "arithmetic"}, "model": {"preset": "tiny-llama"}})


def test_spec_from_a_trl_cli_recipe():
    spec, skipped = spec_from_trl(yaml.safe_load(TRL_CLI_RECIPE), [2, 4, 16], seeds=2)
    assert spec["model"] == {"path": "/models/Qwen2.5-0.5B-Instruct"}
    assert spec["samples_per_step"] == [32] and spec["steps"] == 500  # B = 8 x 4 on one process
    got = _runnable(spec)
    assert got.grpo.lr == 1e-6 and got.grpo.max_new_tokens == 1024 and got.grpo.clip_eps_high == 0.28
    assert got.grpo.loss_aggregation == "token_mean" and got.grpo.advantage == "mean_std"
    assert got.seeds == [0, 1] and got.group_sizes == [2, 4, 16]
    text = "\n".join(skipped)
    assert "dataset_name" in text and "reward_funcs" in text and "bf16" in text
    assert "num_generations: 8" in text  # the recipe's own G is not swept: said
    assert "learning_rate" not in text and "epsilon" not in text  # mapped, not listed


def test_spec_from_a_grpo_config_dump(tmp_path):
    trl = pytest.importorskip("trl")
    dump = trl.GRPOConfig(
        output_dir=str(tmp_path),
        use_cpu=True,
        bf16=False,
        generation_batch_size=64,
        num_generations=8,
        loss_type="dr_grpo",
        scale_rewards="none",
        beta=0.02,
        learning_rate=3e-6,
        max_completion_length=256,
        temperature=0.7,
    ).to_dict()
    with pytest.raises(ValueError, match="--model"):
        spec_from_trl(dump, [4, 8])
    spec, skipped = spec_from_trl(dump, [4, 8, 16], model="/models/m", steps=100)
    got = _runnable(spec)
    assert got.samples_per_step == [64] and got.steps == 100
    assert (got.grpo.loss_aggregation, got.grpo.advantage, got.grpo.kl_beta, got.grpo.lr) == (
        "seq_mean_token_sum_norm",
        "mean",
        0.02,
        3e-6,
    )
    assert (got.grpo.temperature, got.grpo.max_new_tokens, got.grpo.clip_eps) == (0.7, 256, 0.2)
    assert any(line.startswith("output_dir:") for line in skipped)
    with pytest.raises(ValueError, match="do not divide B = 64; allowed: 2, 4, 8, 16, 32, 64"):
        spec_from_trl(dump, [3], model="/m")


@pytest.mark.parametrize(
    "over, words",
    [
        ({"scale_rewards": "batch"}, "scale_rewards: 'batch': scale_rewards 'batch' is refused"),
        ({"loss_type": "cispo"}, "loss_type: 'cispo'"),
        ({"learning_rate": "abc"}, "learning_rate: 'abc'"),
        ({"epsilon": -1}, "epsilon: -1"),
        ({"generation_batch_size": [16]}, "generation_batch_size: [16] is not a whole number"),
        ({"generation_batch_size": 0}, "generation_batch_size: 0 is not a whole number >= 2"),
        ({"gradient_accumulation_steps": 0}, "gradient_accumulation_steps: 0"),
        ({"per_device_train_batch_size": "eight"}, "per_device_train_batch_size: 'eight'"),
        ({"max_steps": [100]}, "max_steps: [100]"),
        ({"num_generations": {"a": 1}}, "num_generations: {'a': 1}"),
    ],
)
def test_a_trl_value_groupscale_cannot_run_as_given_is_refused_naming_it(over, words):
    """Silently dropping it would sweep another objective than the recipe's."""
    with pytest.raises(ValueError) as e:
        spec_from_trl({**yaml.safe_load(TRL_CLI_RECIPE), **over}, [4])
    assert words in str(e.value) and "Value error" not in str(e.value)


@pytest.mark.parametrize("gs", [[], [4, 4], [0, 4], [-2]])
def test_group_sizes_must_be_distinct_and_at_least_2(gs):
    with pytest.raises(ValueError, match="--group-sizes"):
        spec_from_trl(yaml.safe_load(TRL_CLI_RECIPE), gs)


def test_a_recipes_hub_model_id_is_kept_and_flagged_a_local_folder_is_not(tmp_path):
    recipe = yaml.safe_load(TRL_CLI_RECIPE) | {"model_name_or_path": "Qwen/Qwen2.5-0.5B-Instruct"}
    spec, skipped = spec_from_trl(recipe, [2, 4])
    assert spec["model"] == {"path": "Qwen/Qwen2.5-0.5B-Instruct"}
    (note,) = [line for line in skipped if line.startswith("model_name_or_path:")]
    assert "not a local folder" in note and "hf download Qwen/Qwen2.5-0.5B-Instruct --local-dir DIR" in note
    _, skipped = spec_from_trl(recipe | {"model_name_or_path": str(tmp_path)}, [2, 4])
    assert not [line for line in skipped if line.startswith("model_name_or_path:")]
    _, skipped = spec_from_trl(recipe, [2, 4], model=str(tmp_path / "absent"))  # --model: the user's own choice
    assert not [line for line in skipped if line.startswith("model_name_or_path:")]


def test_a_recommendation_that_does_not_divide_b_names_the_allowed_group_sizes():
    with pytest.raises(ValueError, match=r"divide samples_per_step 12; allowed: 2, 3, 4, 6, 12"):
        trl_settings(5, 12, GRPOSpec())

"""The exports of an answer (sweeps.exports): recommendation -> GRPOConfig / verl overrides, from the engine's recipe."""

from fractions import Fraction

import pytest
import yaml

from sweeps.engines import Recipe, get_engine
from sweeps.exports import get_export
from sweeps.exports.trl import trl_settings
from sweeps.spec import GRPOSpec, SweepSpec


def trl_config(group_size, budget, spec, header="", num_processes=1) -> str:
    """`recommend --format trl`'s text for the spec's recipe."""
    return get_export("trl").render(group_size, budget, get_engine(spec.engine).recipe(spec), header, num_processes)


def recipe_grpo(trl: dict) -> GRPOSpec:
    """The objective of an engine-trl spec of ``trl``, in groupscale's names."""
    return get_engine("trl").recipe(_spec(engine="trl", trl=trl)).grpo


def verl_overrides(group_size, budget, grpo, k=Fraction(1)) -> tuple[list[str], list[str]]:
    """`recommend --format verl`'s override lines and its notes, for ``grpo`` with k optimizer steps per generation."""
    text = get_export("verl").render(group_size, budget, Recipe(grpo, k), "")
    lines = text.splitlines()
    return [x for x in lines if not x.startswith("#")], [x.removeprefix("# note: ") for x in lines if x.startswith("# note")]


def _spec(**over) -> SweepSpec:
    base = {"name": "s", "task": {"name": "arithmetic"}, "model": {"preset": "tiny-llama"}, "group_sizes": [2, 4]}
    return SweepSpec.model_validate({"samples_per_step": [48], **base, **over})


@pytest.mark.parametrize("budget", [48, 12])
def test_the_trl_snippet_trains_b_as_one_optimizer_step_as_the_sweep_measured(tmp_path, budget):
    """Under TRL's defaults (per-device batch 8) B = 48 trained as 6 optimizer steps of 8 and B = 12 was refused."""
    trl = pytest.importorskip("trl")
    grpo = {"loss_aggregation": "seq_mean_token_sum_norm", "advantage": "mean", "clip_eps": 0.25, "kl_beta": 0.04}
    text = trl_config(4, budget, _spec(grpo=grpo, samples_per_step=[budget]), f"groupscale: G = 4 at B = {budget}")
    assert text.startswith(f"# groupscale: G = 4 at B = {budget}\n")
    cfg = trl.GRPOConfig(output_dir=str(tmp_path), use_cpu=True, bf16=False, **yaml.safe_load(text))
    assert (cfg.num_generations, cfg.generation_batch_size) == (4, budget)
    assert cfg.steps_per_generation == cfg.gradient_accumulation_steps  # one optimizer step per generation batch
    assert cfg.per_device_train_batch_size * cfg.gradient_accumulation_steps == budget
    assert (cfg.loss_type, cfg.scale_rewards, cfg.epsilon, cfg.beta) == ("dr_grpo", "none", 0.25, 0.04)


@pytest.mark.parametrize("processes", [1, 4])
def test_an_engine_trl_answer_is_the_recipe_with_g_and_its_step_structure_at_b(tmp_path, processes):
    """The user's recipe (2 optimizer steps per generation, a loss and lr of its own) with the measured G and batch
    settings that give B on the given processes; GRPOConfig built from it has that generation batch and structure."""
    trl = pytest.importorskip("trl")
    recipe = {"learning_rate": "1e-6", "loss_type": "grpo", "per_device_train_batch_size": 4, "gradient_accumulation_steps": 2,
              "steps_per_generation": 4, "beta": 0.04}  # fmt: skip
    spec = _spec(engine="trl", trl=recipe, samples_per_step=[64], group_sizes=[4, 8])
    printed = yaml.safe_load(trl_config(8, 64, spec, num_processes=processes))
    assert {k: printed[k] for k in ("learning_rate", "loss_type", "beta")} == {
        "learning_rate": "1e-6",
        "loss_type": "grpo",
        "beta": 0.04,
    }
    printed["learning_rate"] = float(printed["learning_rate"])  # as TRL's parser reads the YAML
    cfg = trl.GRPOConfig(output_dir=str(tmp_path), use_cpu=True, **printed)
    global_batch = cfg.per_device_train_batch_size * processes
    assert (cfg.num_generations, cfg.generation_batch_size) == (8, 64)
    assert cfg.generation_batch_size // (global_batch * cfg.gradient_accumulation_steps) == 2  # 2 optimizer steps of 32
    assert cfg.per_device_train_batch_size <= 4


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


def test_a_recommendation_that_does_not_divide_b_names_the_allowed_group_sizes():
    with pytest.raises(ValueError, match=r"divide samples_per_step 12; allowed: 2, 3, 4, 6, 12"):
        trl_settings(5, 12, GRPOSpec())


def test_trls_defaults_that_an_export_assumes_are_the_installed_trls():
    """A recipe that names none of them trained with these (TRL 1.16); a TRL upgrade that changes one fails here."""
    import dataclasses

    from trl import GRPOConfig

    from sweeps.engines.trl import TRL_DEFAULTS

    defaults = {f.name: f.default for f in dataclasses.fields(GRPOConfig)}
    assert {k: defaults[k] for k in TRL_DEFAULTS} == TRL_DEFAULTS


def test_an_engine_trl_sweeps_verl_export_is_the_recipe_that_was_swept():
    """It exported groupscale's defaults (rloo, seq-mean-token-mean, clip 0.2, 4 tokens) instead of the DAPO recipe."""
    dapo = {"loss_type": "dapo", "epsilon": 0.2, "epsilon_high": 0.28, "beta": 0.0, "scale_rewards": "group",
            "max_completion_length": 1024, "temperature": 0.7, "learning_rate": "1e-6"}  # fmt: skip
    got = dict(line.split("=", 1) for line in verl_overrides(8, 64, recipe_grpo(dapo))[0])
    assert got["actor_rollout_ref.actor.loss_agg_mode"] == "token-mean"
    assert got["algorithm.adv_estimator"] == "grpo" and got["algorithm.norm_adv_by_std_in_grpo"] == "True"
    assert (got["actor_rollout_ref.actor.clip_ratio_low"], got["actor_rollout_ref.actor.clip_ratio_high"]) == ("0.2", "0.28")
    assert (got["data.max_response_length"], got["actor_rollout_ref.rollout.temperature"]) == ("1024", "0.7")
    bare = dict(line.split("=", 1) for line in verl_overrides(8, 64, recipe_grpo({}))[0])  # TRL's defaults
    assert (bare["data.max_response_length"], bare["actor_rollout_ref.actor.loss_agg_mode"]) == ("512", "token-mean")
    with pytest.raises(ValueError, match="loss_type"):
        recipe_grpo({"loss_type": "a-new-one"})


@pytest.mark.parametrize(
    ("k", "batch", "mini", "note"),
    [
        (Fraction(1), "16", "16", False),
        (Fraction(2), "16", "8", False),  # two optimizer steps per generation: two mini-batches
        (Fraction(1, 4), "64", "64", True),  # Lite PPO's 4 generations per step: one verl batch of 4 B
    ],
)
def test_the_verl_export_keeps_an_engine_trl_recipes_steps_per_generation(k, batch, mini, note):
    """It exported one optimizer step per batch whatever steps_per_generation the swept recipe had."""
    lines, notes = verl_overrides(4, 64, GRPOSpec(), k)
    got = dict(line.split("=", 1) for line in lines)
    assert (got["data.train_batch_size"], got["actor_rollout_ref.actor.ppo_mini_batch_size"]) == (batch, mini)
    assert any("4 generations of B = 64 per optimizer step are one verl batch" in n for n in notes) == note
    with pytest.raises(ValueError, match="steps_per_generation: '3/2': verl's ppo_mini_batch_size must divide"):
        verl_overrides(4, 64, GRPOSpec(), Fraction(3, 2))
    with pytest.raises(ValueError, match="16 prompts per batch do not split into 3 verl mini-batches"):
        verl_overrides(4, 64, GRPOSpec(), Fraction(3))


def test_the_exports_are_a_registry_an_unknown_or_twice_registered_one_is_refused():
    from sweeps.exports import EXPORTS, Export, register_export

    assert list(EXPORTS) == ["easyr1", "nemo-rl", "openrlhf", "prime-rl", "skyrl", "trl", "verl"]
    with pytest.raises(ValueError, match=r"unknown export 'nemo'; valid: easyr1, nemo-rl, openrlhf, prime-rl, skyrl, trl, verl"):
        get_export("nemo")

    class Again(Export):
        name = "verl"

    with pytest.raises(ValueError, match="export 'verl' is registered twice"):
        register_export(Again)
    Again.name = "json"  # recommend's own: an export of that name could never be reached
    with pytest.raises(ValueError, match="export 'json' is registered twice, or is recommend's own format"):
        register_export(Again)


def test_the_trl_export_of_a_k4_gspo_sweep_trains_the_same_objective_in_trls_own_config(tmp_path):
    """k = 4 optimizer steps per generation and the sequence-level ratio reach GRPOConfig, which TRL itself accepts."""
    from trl import GRPOConfig

    settings, _ = trl_settings(8, 512, GRPOSpec(steps_per_generation=4, importance_sampling_level="sequence"))
    config = GRPOConfig(output_dir=str(tmp_path), use_cpu=True, **settings)
    assert (config.generation_batch_size, config.steps_per_generation, config.gradient_accumulation_steps) == (512, 4, 1)
    assert config.per_device_train_batch_size * config.gradient_accumulation_steps == 128  # B / k a step
    assert config.importance_sampling_level == "sequence"

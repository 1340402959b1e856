"""NeMo-RL's configs in the budget vocabulary and back (sweeps.frameworks.nemo_rl), on files written in its shapes
(tests/fixtures/frameworks/nemo-rl/, each citing the upstream file it copies the shape of)."""

import importlib
import shutil
from fractions import Fraction
from pathlib import Path

import pytest

import sweeps.frameworks.nemo_rl  # noqa: F401  (registers nemo-rl)
from sweeps.engines import Recipe
from sweeps.frameworks import Refused, get_framework
from sweeps.frameworks.editing import edit_config, file_budget
from sweeps.frameworks.importing import recognise, spec_from
from sweeps.spec import GRPOSpec, SweepSpec
from tests.sweeps.test_frameworks import changed_lines

ROOT = Path(__file__).resolve().parents[1] / "fixtures" / "frameworks" / "nemo-rl"
BASE, GSPO, DAPO = (
    "examples/configs/grpo_math_1B.yaml",
    "examples/configs/recipes/llm/grpo-gspo-1.5b.yaml",
    "examples/configs/recipes/llm/dapo-qwen2.5-7b.yaml",
)
SCRIPT = "test_suites/grpo-gspo-1.5b.sh"
DAPO_DROPS = ("grpo.use_dynamic_sampling", "grpo.reward_shaping.enabled", "loss_fn.ratio_clip_c")


def budget(file: str, *overrides: str):
    return file_budget(get_framework("nemo-rl"), ROOT / file, list(overrides))


def objective(got) -> tuple:
    return tuple(got.grpo[k] for k in ("steps_per_generation", "inner_steps", "loss_aggregation", "advantage"))


def test_grpo_math_1b_is_g_16_at_b_512_completions_one_step_a_generation():
    """32 prompts x 16 = B 512 completions; train_global_batch_size 512 completions: k = 1; LOO baseline and std."""
    got = budget(BASE)
    assert (got.group_size, got.samples_per_step, got.steps) == (16, 512, None)  # max_num_steps 1000000: no limit
    assert objective(got) == (1, 1, "token_mean", "loo_std")
    assert (got.grpo["importance_sampling_level"], got.grpo["clip_eps"], got.grpo["clip_eps_high"]) == ("token", 0.2, 0.2)
    assert (got.grpo["kl_beta"], got.grpo["lr"], got.grpo["temperature"], got.grpo["max_new_tokens"]) == (0.01, 5e-6, 1.0, 512)
    assert (got.model, got.data) == ("Qwen/Qwen2.5-1.5B", "OpenMathInstruct-2")


def test_a_child_config_inherits_its_defaults_two_folders_up_with_mul_and_a_replaced_section():
    """The child's max_total_sequence_length reaches the base's max_new_tokens interpolation; ${mul:16, 4} is 64
    completions a step (k 16); ``data: _override_`` drops the base's dataset_name."""
    got = budget(GSPO)
    assert (got.group_size, got.samples_per_step, got.steps) == (8, 1024, 800)  # 50 generations x k 16
    assert objective(got) == (16, 1, "seq_mean_token_mean", "loo_std")
    assert (got.grpo["importance_sampling_level"], got.grpo["kl_beta"], got.grpo["max_new_tokens"]) == ("sequence", 0.0, 8192)
    assert (got.grpo["lr"], got.data) == (2e-6, "~/data/deepscaler/train.jsonl")
    config = get_framework("nemo-rl").read(ROOT / GSPO, [])
    assert config.get("data.train.dataset_name") is None and config.get("policy.tokenizer.name") == got.model


def test_a_run_script_reads_its_config_from_the_repositorys_root_and_its_knobs():
    got = budget(SCRIPT)
    assert (got.group_size, got.samples_per_step, got.steps) == (8, 1024, 320)  # MAX_STEPS 20 x k 16
    assert objective(budget(SCRIPT, "PROMPTS=64")) == (8, 1, "seq_mean_token_mean", "loo_std")  # B 512 / 64 completions
    assert budget(SCRIPT, "grpo.num_generations_per_prompt=4").samples_per_step == 512
    spec, notes = spec_from(get_framework("nemo-rl"), ROOT / SCRIPT, [], model="/models/q")
    assert notes[0] == "read grpo-gspo-1.5b.sh as NeMo-RL (NVIDIA-NeMo/RL@7ea279a, 2026-08)"
    assert spec["group_sizes"] == [2, 4, 8, 16, 32] and spec["grpo"]["advantage"] == "loo_std"
    parsed = SweepSpec.model_validate({**spec, "task": {"name": "arithmetic"}, "model": {"preset": "tiny-llama"}})
    assert (parsed.grpo.steps_per_generation, parsed.grpo.importance_sampling_level) == (16, "sequence")


@pytest.mark.parametrize(
    ("overrides", "advantage"),
    [
        ((), "loo_std"),
        (("grpo.normalize_rewards=false",), "loo"),
        (("grpo.use_leave_one_out_baseline=false",), "mean_std"),
        (("grpo.use_leave_one_out_baseline=false", "grpo.normalize_rewards=false"), "mean"),
        (("grpo.adv_estimator.use_leave_one_out_baseline=false",), "mean_std"),  # the estimator's own key wins
    ],
)
def test_the_advantage_is_the_estimators_two_flags(overrides, advantage):
    assert budget(BASE, *overrides).grpo["advantage"] == advantage


def test_dapo_is_refused_for_each_setting_that_changes_what_trains_until_dropped():
    for i, key in enumerate(DAPO_DROPS):
        with pytest.raises(Refused, match=rf"^{key}: .*; --drop {key} measures G without it$"):
            budget(DAPO, *(f"{k}=null" for k in DAPO_DROPS[:i]))
    got = budget(DAPO, *(f"{k}=null" for k in DAPO_DROPS))
    assert (got.group_size, got.samples_per_step) == (16, 8192) and objective(got) == (16, 1, "token_mean", "mean_std")
    assert (got.grpo["clip_eps_high"], got.grpo["lr"], got.grpo["max_new_tokens"]) == (0.28, 1e-6, 16384)  # Megatron's lr
    _, notes = spec_from(get_framework("nemo-rl"), ROOT / DAPO, [], drop=DAPO_DROPS)
    assert "dropped grpo.use_dynamic_sampling: the sweep measures G without it" in notes


@pytest.mark.parametrize(
    ("file", "override", "refused"),
    [
        (BASE, "grpo.async_grpo.enabled=true", "grpo.async_grpo.enabled: True: asynchronous GRPO"),
        (BASE, "loss_fn.use_importance_sampling_correction=true", "use_importance_sampling_correction: True: reweights"),
        (BASE, "loss_fn.force_on_policy_ratio=true", "force_on_policy_ratio: True: fixes the ratio at 1"),
        (BASE, "loss_fn.use_kl_in_reward=true", "use_kl_in_reward: True: a KL penalty in the reward"),
        (BASE, "loss_fn.reference_policy_kl_type=k2", "reference_policy_kl_type: 'k2': groupscale's KL is k3"),
        (BASE, "grpo.adv_estimator.name=reinforce_plus_plus", "adv_estimator.name: 'reinforce_plus_plus'"),
        (BASE, "grpo.overlong_filtering=true", "overlong_filtering: True: masks the loss of truncated completions"),
        (BASE, "grpo.num_generations_per_prompt=1", "num_generations_per_prompt: 1: GRPO samples G >= 2"),
        (BASE, "policy.train_global_batch_size=100", r"train_global_batch_size: 100: .* 512 / 100 is not a whole number"),
        (SCRIPT, "policy.train_global_batch_size=4", "train_global_batch_size: 4: an optimizer step of 4 completions splits"),
        (GSPO, "loss_fn.token_level_loss=true", "sequence_level_importance_ratios: True: NeMo-RL requires token_level_loss"),
    ],
)
def test_a_setting_groupscale_cannot_train_is_refused_naming_it(file, override, refused):
    with pytest.raises(Refused, match=refused):
        budget(file, override)


def test_a_child_whose_base_is_not_here_takes_grpo_math_1bs_values_and_says_so(tmp_path):
    shutil.copy(ROOT / GSPO, tmp_path / "gspo.yaml")
    _, notes = spec_from(get_framework("nemo-rl"), tmp_path / "gspo.yaml", [])
    assert (
        "gspo.yaml's defaults ../../grpo_math_1B.yaml is not here: the keys it would set take grpo_math_1B.yaml's values" in notes
    )
    got = budget(tmp_path / "gspo.yaml")
    assert (got.group_size, got.samples_per_step, got.grpo["steps_per_generation"], got.grpo["kl_beta"]) == (8, 1024, 16, 0.0)


@pytest.mark.parametrize(
    ("file", "expected"),
    [
        (BASE, ["num_generations_per_prompt: 2", "num_prompts_per_step: 256"]),
        (GSPO, ["num_generations_per_prompt: 2", "num_prompts_per_step: 512"]),
        (SCRIPT, ["grpo.num_generations_per_prompt=2", "grpo.num_prompts_per_step=512"]),
    ],
)
def test_recommend_config_changes_g_and_the_prompts_a_step_and_nothing_else(file, expected, tmp_path):
    """train_global_batch_size counts completions: at the file's B and k it stays; the edited file reads back as G 2
    at the same B and objective."""
    framework, path = get_framework("nemo-rl"), ROOT / file
    before = file_budget(framework, path)
    text = edit_config(framework, path, 2, dict(before.grpo), before)
    assert sorted(changed_lines(path.read_text(), text)) == expected
    shutil.copytree(ROOT, tmp_path / "nemo-rl")  # the edited file in its place: its defaults and --config are relative
    (tmp_path / "nemo-rl" / file).write_text(text)
    after = file_budget(framework, tmp_path / "nemo-rl" / file)
    assert (after.group_size, after.samples_per_step, after.grpo) == (2, before.samples_per_step, before.grpo)


@pytest.fixture
def export():
    """The nemo-rl export, its registration undone after (the exports' registry is checked elsewhere)."""
    from sweeps.exports import EXPORTS

    before = dict(EXPORTS)
    yield importlib.import_module("sweeps.exports.nemo_rl").NemoRLExport()
    EXPORTS.clear()
    EXPORTS.update(before)


def test_the_export_writes_the_prompts_a_step_and_the_completions_an_optimizer_step(export):
    grpo = GRPOSpec(advantage="loo_std", loss_aggregation="token_mean", kl_beta=0.001, steps_per_generation=4)
    lines = dict(line.split("=", 1) for line in export.render(8, 256, Recipe(grpo, Fraction(4)), "").splitlines()
                 if not line.startswith("#"))  # fmt: skip
    assert {k: lines[k] for k in ("grpo.num_generations_per_prompt", "grpo.num_prompts_per_step",
                                  "policy.train_global_batch_size")} == {"grpo.num_generations_per_prompt": "8",
                                  "grpo.num_prompts_per_step": "32", "policy.train_global_batch_size": "64"}  # fmt: skip
    assert (lines["grpo.adv_estimator.use_leave_one_out_baseline"], lines["grpo.adv_estimator.normalize_rewards"]) == (
        "True",
        "True",
    )
    assert (lines["loss_fn.token_level_loss"], lines["loss_fn.reference_policy_kl_type"]) == ("True", "k3")
    for grpo, k, refused in [
        (GRPOSpec(inner_steps=2), 1, "inner_steps: 2: NeMo-RL makes one pass"),
        (GRPOSpec(), Fraction(1, 2), "steps_per_generation: '1/2'"),
        (GRPOSpec(loss_aggregation="seq_mean_token_sum_norm"), 1, "loss_aggregation"),
    ]:
        with pytest.raises(ValueError, match=refused):
            export.render(8, 256, Recipe(grpo, Fraction(k)), "")


def test_spec_from_recognises_nemo_rls_files_and_verls_stay_verls():
    assert {recognise(ROOT / f).name for f in (BASE, GSPO, DAPO, SCRIPT)} == {"nemo-rl"}
    verl = ROOT.parent / "verl"
    assert {recognise(verl / f).name for f in ("run_grpo_8b.sh", "run_gspo.sh", "ppo_trainer.yaml")} == {"verl"}

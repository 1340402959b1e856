"""SkyRL's run scripts and legacy YAML in the budget vocabulary and back (sweeps.frameworks.skyrl), on files written in
its shapes (tests/fixtures/frameworks/skyrl/, each citing the upstream file it copies the shape of)."""

import importlib
import shutil
from fractions import Fraction
from pathlib import Path

import pytest

import sweeps.frameworks.skyrl  # noqa: F401  (registers skyrl)
from sweeps.engines import Recipe
from sweeps.frameworks import Refused, get_framework
from sweeps.frameworks.editing import edit_config, file_budget
from sweeps.frameworks.importing import recognise, spec_from
from sweeps.spec import GRPOSpec, SweepSpec
from tests.sweeps.test_frameworks import changed_lines

ROOT = Path(__file__).resolve().parents[1] / "fixtures" / "frameworks" / "skyrl"
GSM8K, GSPO = "examples/train/gsm8k/run_gsm8k.sh", "examples/train/algorithms/gspo/run_gspo_gsm8k.sh"
DAPO, LEGACY = "examples/train/algorithms/dapo/run_dapo_gsm8k.sh", "ppo_base_config.yaml"
DAPO_DROPS = (  # in the order they are refused
    "trainer.algorithm.dynamic_sampling.type",
    "trainer.algorithm.overlong_buffer_len",
    "generator.apply_overlong_filtering",
    "trainer.algorithm.loss_reduction",
    "trainer.algorithm.policy_loss_type",
)


def budget(file: str, *overrides: str):
    return file_budget(get_framework("skyrl"), ROOT / file, list(overrides))


def objective(got) -> tuple:
    return tuple(got.grpo[k] for k in ("steps_per_generation", "inner_steps", "loss_aggregation", "advantage"))


def test_run_gsm8k_counts_prompts_b_5120_and_k_4_with_its_knobs():
    """1024 prompts x 5 = B 5120 completions; policy_mini_batch_size 256 prompts: k = 1024 / 256 = 4; SkyRL's default
    KL loss (k3, 0.001)."""
    got = budget(GSM8K)
    assert (got.group_size, got.samples_per_step, got.steps) == (5, 5120, None)
    assert objective(got) == (4, 1, "token_mean", "mean_std") and got.grpo["importance_sampling_level"] == "token"
    assert (got.grpo["clip_eps"], got.grpo["clip_eps_high"], got.grpo["kl_beta"], got.grpo["lr"]) == (0.2, 0.2, 0.001, 1e-6)
    assert (got.grpo["max_new_tokens"], got.model, got.data) == (
        1024,
        "Qwen/Qwen2.5-1.5B-Instruct",
        "$HOME/data/gsm8k/train.parquet",
    )
    knobs = budget(GSM8K, "N_SAMPLES=8", "MINI_BATCH_SIZE=512")
    assert (knobs.samples_per_step, knobs.grpo["steps_per_generation"]) == (8192, 2)
    assert budget(GSM8K, "DATA_DIR=/data").data == "/data/train.parquet"  # : "${DATA_DIR:=...}" takes the variable


def test_a_script_that_runs_another_is_that_script_with_its_settings_after():
    got = budget(GSPO)
    assert (got.group_size, got.samples_per_step) == (5, 5120) and objective(got) == (4, 1, "seq_mean_token_mean", "mean_std")
    assert got.grpo["importance_sampling_level"] == "sequence"
    spec, notes = spec_from(get_framework("skyrl"), ROOT / GSPO, [], model="/models/q")
    assert "read run_gsm8k.sh, which run_gspo_gsm8k.sh runs, with run_gspo_gsm8k.sh's settings after its own" in notes
    parsed = SweepSpec.model_validate({**spec, "task": {"name": "arithmetic"}, "model": {"preset": "tiny-llama"}})
    assert (parsed.grpo.steps_per_generation, parsed.grpo.importance_sampling_level) == (4, "sequence")
    assert spec["group_sizes"] == [5, 10, 20]  # G, twice and four times: a half or a quarter of 5 is no G


def test_dapo_is_refused_for_each_setting_that_changes_what_trains_until_dropped():
    """Its own entry module's overlong punishment (main_dapo's default 512) is refused as its other DAPO settings."""
    for i, key in enumerate(DAPO_DROPS):
        with pytest.raises(Refused, match=rf"^{key}: .*--drop {key} measures G"):
            budget(DAPO, *(f"{k}=null" for k in DAPO_DROPS[:i]))
    got = budget(DAPO, *(f"{k}=null" for k in DAPO_DROPS))
    assert (got.group_size, got.samples_per_step) == (5, 5120) and objective(got) == (4, 1, "token_mean", "mean_std")
    assert (got.grpo["clip_eps_high"], got.grpo["kl_beta"]) == (0.28, 0.0)
    _, notes = spec_from(get_framework("skyrl"), ROOT / DAPO, [], drop=DAPO_DROPS)
    assert any(n.startswith("examples.train.algorithms.dapo.main_dapo is an example's own entry module") for n in notes)


@pytest.mark.parametrize(
    ("override", "refused"),
    [
        ("trainer.fully_async.enabled=true", "fully_async.enabled: True: fully asynchronous training"),
        ("trainer.algorithm.use_kl_in_reward=true", "use_kl_in_reward: True: a KL penalty in the reward"),
        ("trainer.algorithm.kl_estimator_type=k1", "kl_estimator_type: 'k1': groupscale's KL is k3"),
        ("trainer.algorithm.advantage_batch_normalize=true", "advantage_batch_normalize: True: normalises the advantages"),
        ("trainer.algorithm.zero_variance_filter=true", "zero_variance_filter: True: masks the loss"),
        ("trainer.algorithm.advantage_estimator=reinforce++", r"advantage_estimator: 'reinforce\+\+'"),
        ("trainer.algorithm.policy_loss_type=dual_clip", "policy_loss_type: 'dual_clip': groupscale trains regular, gspo"),
        ("trainer.algorithm.loss_reduction=prompt_mean", "loss_reduction: 'prompt_mean'"),
        ("trainer.algorithm.loss_reduction=seq_mean_token_sum_norm", "max_seq_len: None: divides the token sums"),
        ("trainer.algorithm.temperature=0.7", "algorithm.temperature: 0.7: scales the logits"),
        ("generator.max_turns=3", "max_turns: 3: multi-turn rollouts"),
        ("trainer.policy_mini_batch_size=300", r"policy_mini_batch_size: 300: .*1024 / 300 is not a whole number"),
    ],
)
def test_a_setting_groupscale_cannot_train_is_refused_naming_it(override, refused):
    with pytest.raises(Refused, match=refused):
        budget(GSM8K, override)


def test_the_legacy_yaml_is_read_with_its_hydra_defaults_list_and_rloo():
    got = budget(LEGACY)
    assert (got.group_size, got.samples_per_step, got.steps) == (8, 2048, 120)  # 30 steps x k 4
    assert objective(got) == (4, 2, "seq_mean_token_sum_norm", "loo") and got.grpo["kl_beta"] == 0.0
    assert (got.grpo["clip_eps_high"], got.grpo["temperature"], got.grpo["max_new_tokens"]) == (0.28, 0.8, 2048)


@pytest.mark.parametrize(
    ("file", "expected"),
    [
        (GSM8K, ["generator.n_samples_per_prompt=2", "trainer.policy_mini_batch_size=640", "trainer.train_batch_size=2560"]),
        (GSPO, ["generator.n_samples_per_prompt=2", "trainer.policy_mini_batch_size=640", "trainer.train_batch_size=2560"]),
        (LEGACY, ["n_samples_per_prompt: 2", "policy_mini_batch_size: 256", "train_batch_size: 1024"]),
    ],
)
def test_recommend_config_changes_g_and_the_keys_tied_to_it_and_nothing_else(file, expected, tmp_path):
    """Both batches count prompts: at the file's B and k they move with G (a script that runs another gets them after
    its own words); the edited file reads back as G 2 at the same B, k and objective."""
    framework, path = get_framework("skyrl"), ROOT / file
    before = file_budget(framework, path)
    text = edit_config(framework, path, 2, dict(before.grpo), before)
    assert sorted(changed_lines(path.read_text(), text)) == expected
    shutil.copytree(ROOT, tmp_path / "skyrl")  # the edited file in its place: the other script is relative to the root
    (tmp_path / "skyrl" / file).write_text(text)
    after = file_budget(framework, tmp_path / "skyrl" / file)
    assert (after.group_size, after.samples_per_step, after.grpo) == (2, before.samples_per_step, before.grpo)


@pytest.fixture
def export():
    """The skyrl export, its registration undone after (the exports' registry is checked elsewhere)."""
    from sweeps.exports import EXPORTS

    before = dict(EXPORTS)
    yield importlib.import_module("sweeps.exports.skyrl").SkyRLExport()
    EXPORTS.clear()
    EXPORTS.update(before)


def test_the_export_counts_prompts_and_names_the_loss_reduction(export):
    grpo = GRPOSpec(advantage="mean", loss_aggregation="seq_mean_token_sum_norm", max_new_tokens=256, steps_per_generation=2)
    lines = dict(x.split("=", 1) for x in export.render(8, 128, Recipe(grpo, Fraction(2)), "").splitlines() if "=" in x)
    assert {k: lines[k] for k in ("generator.n_samples_per_prompt", "trainer.train_batch_size",
                                  "trainer.policy_mini_batch_size")} == {"generator.n_samples_per_prompt": "8",
                                  "trainer.train_batch_size": "16", "trainer.policy_mini_batch_size": "8"}  # fmt: skip
    assert (lines["trainer.algorithm.loss_reduction"], lines["trainer.algorithm.max_seq_len"]) == (
        "seq_mean_token_sum_norm",
        "256",
    )
    assert (lines["trainer.algorithm.grpo_norm_by_std"], lines["trainer.algorithm.use_kl_loss"]) == ("False", "False")
    with pytest.raises(ValueError, match="advantage: 'loo_std': SkyRL's estimators"):
        export.render(8, 128, Recipe(GRPOSpec(advantage="loo_std"), Fraction(1)), "")


def test_spec_from_recognises_skyrls_files_and_verls_stay_verls():
    assert {recognise(ROOT / f).name for f in (GSM8K, DAPO, LEGACY, GSPO)} == {"skyrl"}  # GSPO's runs GSM8K's
    verl = ROOT.parent / "verl"
    assert {recognise(verl / f).name for f in ("run_grpo_8b.sh", "run_gspo.sh", "ppo_trainer.yaml")} == {"verl"}

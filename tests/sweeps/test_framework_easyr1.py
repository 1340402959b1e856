"""EasyR1's configs in the budget vocabulary and back (sweeps.frameworks.easyr1), on files written in its shapes
(tests/fixtures/frameworks/easyr1/, each citing the upstream file it copies the shape of)."""

import importlib
import shutil
from fractions import Fraction
from pathlib import Path

import pytest

import sweeps.frameworks.easyr1  # noqa: F401  (registers easyr1)
from sweeps.engines import Recipe
from sweeps.frameworks import Refused, get_framework
from sweeps.frameworks.editing import edit_config, file_budget
from sweeps.frameworks.importing import recognise, spec_from
from sweeps.spec import GRPOSpec, SweepSpec
from tests.sweeps.test_frameworks import changed_lines

ROOT = Path(__file__).resolve().parents[1] / "fixtures" / "frameworks" / "easyr1"
CONFIG, SCRIPT = "examples/config.yaml", "examples/qwen3_4b_geo3k_gspo.sh"


def budget(file: str, *overrides: str):
    return file_budget(get_framework("easyr1"), ROOT / file, list(overrides))


def test_config_yaml_counts_prompts_b_2560_and_k_4():
    """512 prompts x n 5 = B 2560 completions; global_batch_size 128 prompts: k = 512 / 128 = 4."""
    got = budget(CONFIG)
    assert (got.group_size, got.samples_per_step, got.steps) == (5, 2560, None)  # 15 epochs of a data set: unknown here
    assert {k: got.grpo[k] for k in ("steps_per_generation", "inner_steps", "loss_aggregation", "advantage")} == {
        "steps_per_generation": 4, "inner_steps": 1, "loss_aggregation": "token_mean", "advantage": "mean_std"}  # fmt: skip
    assert (got.grpo["clip_eps"], got.grpo["clip_eps_high"], got.grpo["importance_sampling_level"]) == (0.2, 0.3, "token")
    assert (got.grpo["kl_beta"], got.grpo["lr"], got.grpo["max_new_tokens"]) == (0.01, 1e-6, 2048)
    assert (got.model, got.data) == ("Qwen/Qwen2.5-7B-Instruct", "hiyouga/math12k@train")


def test_a_run_script_reads_config_yaml_from_the_repositorys_root_and_its_gspo_overrides():
    got = budget(SCRIPT)
    assert (got.group_size, got.samples_per_step, got.steps) == (8, 4096, 400)  # max_steps 100 x k 4
    assert (got.grpo["importance_sampling_level"], got.grpo["loss_aggregation"]) == ("sequence", "seq_mean_token_mean")
    assert (got.grpo["clip_eps"], got.grpo["clip_eps_high"], got.grpo["kl_beta"], got.grpo["max_new_tokens"]) == (
        3e-4, 4e-4, 0.0, 4096)  # fmt: skip
    assert (got.model, budget(SCRIPT, "N=4").samples_per_step) == ("Qwen/Qwen3-4B", 2048)
    spec, notes = spec_from(get_framework("easyr1"), ROOT / SCRIPT, [], model="/models/q")
    assert notes[0] == "read qwen3_4b_geo3k_gspo.sh as EasyR1 (hiyouga/EasyR1@b44b311, 2026-07)"
    assert any(n.startswith("loss_avg_mode seq read as seq_mean_token_mean") for n in notes)
    assert spec["group_sizes"] == [2, 4, 8, 16, 32] and spec["samples_per_step"] == [4096]
    parsed = SweepSpec.model_validate({**spec, "task": {"name": "arithmetic"}, "model": {"preset": "tiny-llama"}})
    assert (parsed.grpo.steps_per_generation, parsed.grpo.importance_sampling_level) == (4, "sequence")


@pytest.mark.parametrize(
    ("override", "refused"),
    [
        ("algorithm.online_filtering=true", "algorithm.online_filtering: True: online filtering .* --drop algorithm.online"),
        ("algorithm.use_kl_loss=false", "algorithm.kl_coef: 0.01: without algorithm.use_kl_loss the KL is a reward penalty"),
        ("algorithm.kl_penalty=kl", "algorithm.kl_penalty: 'kl': groupscale's KL is k3"),
        ("algorithm.adv_estimator=reinforce_plus_plus", "adv_estimator: 'reinforce_plus_plus': .*allowed: grpo, rloo"),
        ("worker.actor.loss_type=cispo", "loss_type: 'cispo': groupscale trains default, gspo, gspo_token"),
        ("worker.actor.clip_ratio_dual=10.0", "clip_ratio_dual: 10.0: a dual clip other than EasyR1's default 3"),
        ("worker.actor.global_batch_size=100", r"global_batch_size: 100: .*512 / 100 is not a whole number"),
        ("worker.rollout.n=1", "worker.rollout.n: 1: GRPO samples G >= 2"),
    ],
)
def test_a_setting_groupscale_cannot_train_is_refused_naming_it(override, refused):
    with pytest.raises(Refused, match=refused):
        budget(CONFIG, override)


def test_kl_off_the_estimators_and_a_dropped_setting():
    assert budget(CONFIG, "algorithm.disable_kl=true", "algorithm.use_kl_loss=false").grpo["kl_beta"] == 0.0
    assert budget(CONFIG, "algorithm.adv_estimator=rloo").grpo["advantage"] == "loo"
    assert budget(CONFIG, "worker.actor.ppo_epochs=2").grpo["inner_steps"] == 2
    spec, notes = spec_from(get_framework("easyr1"), ROOT / CONFIG, ["algorithm.online_filtering=true"],
                            drop=("algorithm.online_filtering",))  # fmt: skip
    assert spec["samples_per_step"] == [2560] and "dropped algorithm.online_filtering: the sweep measures G without it" in notes


@pytest.mark.parametrize(
    ("file", "expected"),
    [
        (CONFIG, ["global_batch_size: 320 # equivalent to verl's actor.ppo_mini_batch_size", "n: 2",
                  "rollout_batch_size: 1280 # equivalent to verl's data.train_batch_size"]),
        (SCRIPT, ["data.rollout_batch_size=2048", "worker.actor.global_batch_size=512", "worker.rollout.n=2"]),
    ],
)  # fmt: skip
def test_recommend_config_changes_g_and_the_keys_tied_to_it_and_nothing_else(file, expected, tmp_path):
    """Both batches count prompts: at the file's B and k they move with G; the edited file reads back as G 2 at the
    same B, k and objective."""
    framework, path = get_framework("easyr1"), ROOT / file
    before = file_budget(framework, path)
    text = edit_config(framework, path, 2, dict(before.grpo), before)
    assert sorted(changed_lines(path.read_text(), text)) == expected
    shutil.copytree(ROOT, tmp_path / "easyr1")  # the edited file in its place: config= is relative to the root
    (tmp_path / "easyr1" / file).write_text(text)
    after = file_budget(framework, tmp_path / "easyr1" / file)
    assert (after.group_size, after.samples_per_step, after.grpo) == (2, before.samples_per_step, before.grpo)


@pytest.fixture
def export():
    """The easyr1 export, its registration undone after (the exports' registry is checked elsewhere)."""
    from sweeps.exports import EXPORTS

    before = dict(EXPORTS)
    yield importlib.import_module("sweeps.exports.easyr1").EasyR1Export()
    EXPORTS.clear()
    EXPORTS.update(before)


def test_the_export_counts_prompts_and_writes_the_kl_as_a_loss(export):
    grpo = GRPOSpec(advantage="mean_std", loss_aggregation="token_mean", kl_beta=0.001, importance_sampling_level="sequence")
    text = export.render(4, 64, Recipe(grpo, Fraction(4)), "")
    lines = dict(line.split("=", 1) for line in text.splitlines() if not line.startswith("#"))
    assert {k: lines[k] for k in ("worker.rollout.n", "data.rollout_batch_size", "worker.actor.global_batch_size")} == {
        "worker.rollout.n": "4", "data.rollout_batch_size": "16", "worker.actor.global_batch_size": "4"}  # fmt: skip
    assert (lines["worker.actor.loss_type"], lines["algorithm.kl_penalty"], lines["algorithm.disable_kl"]) == (
        "gspo", "low_var_kl", "False")  # fmt: skip
    lines = dict(x.split("=", 1) for x in export.render(4, 64, Recipe(GRPOSpec(), Fraction(1, 4)), "").splitlines() if "=" in x)
    assert (lines["data.rollout_batch_size"], lines["worker.actor.global_batch_size"], lines["algorithm.adv_estimator"]) == (
        "64", "64", "rloo")  # fmt: skip
    with pytest.raises(ValueError, match="advantage: 'mean': EasyR1's estimators are grpo"):
        export.render(4, 64, Recipe(GRPOSpec(advantage="mean"), Fraction(1)), "")


def test_spec_from_recognises_easyr1s_files_and_not_verls():
    assert {recognise(ROOT / f).name for f in (CONFIG, SCRIPT)} == {"easyr1"}
    verl = ROOT.parent / "verl"
    assert {recognise(verl / f).name for f in ("run_grpo_8b.sh", "run_gspo.sh", "ppo_trainer.yaml")} == {"verl"}

"""Trainers' configs in the budget vocabulary and back (sweeps.frameworks), on files written in their shapes
(tests/fixtures/frameworks/<trainer>/, each citing the file it copies the shape of)."""

import difflib
import re
from pathlib import Path

import pytest

from sweeps.frameworks import FRAMEWORKS, Refused, get_framework
from sweeps.frameworks.editing import ObjectiveDiffers, edit_config, file_budget
from sweeps.frameworks.importing import recognise, spec_from
from sweeps.spec import SweepSpec

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "frameworks"


def budget(name: str, file: str, *overrides: str):
    return file_budget(get_framework(name), FIXTURES / name / file, list(overrides))


def changed_lines(before: str, after: str) -> list[str]:
    """The lines of ``after`` that differ from ``before`` (additions and replacements)."""
    diff = difflib.unified_diff(before.splitlines(), after.splitlines(), n=0, lineterm="")
    return [re.sub(r"\s+#", " #", line[1:].strip(" \\")) for line in diff if line.startswith("+") and not line.startswith("+++")]


def test_a_verl_run_script_gives_its_own_budget_in_completions_and_its_mini_batches_as_k():
    """verl counts prompts: 1024 prompts x n 5 = B 5120 completions; 1024 / ppo_mini_batch_size 256 = k 4."""
    got = budget("verl", "run_grpo_8b.sh")
    assert (got.group_size, got.samples_per_step) == (5, 5120)
    assert {k: got.grpo[k] for k in ("steps_per_generation", "inner_steps", "advantage", "loss_aggregation")} == {
        "steps_per_generation": 4, "inner_steps": 1, "advantage": "mean_std", "loss_aggregation": "token_mean"}  # fmt: skip
    assert (got.grpo["kl_beta"], got.grpo["lr"], got.grpo["max_new_tokens"]) == (0.001, 1e-6, 2048)
    assert (got.model, got.data) == ("Qwen/Qwen3-8B", "$HOME/data/gsm8k/train.parquet")
    npu = budget("verl", "run_grpo_8b.sh", "DEVICE=npu")  # the other branch of its case, as bash would take it
    assert (npu.samples_per_step, npu.grpo["steps_per_generation"], npu.grpo["max_new_tokens"]) == (80, 1, 32768)
    assert budget("verl", "run_grpo_8b.sh", "ROLLOUT_N=8", "actor_rollout_ref.actor.ppo_epochs=2").grpo["inner_steps"] == 2
    with pytest.raises(Refused, match=r"ppo_mini_batch_size: .*64 / 256 is not a whole number"):
        budget("verl", "run_grpo_8b.sh", "TRAIN_BATCH_SIZE=64")


def test_verls_gspo_script_and_a_yaml_config_keep_their_objective():
    gspo = budget("verl", "run_gspo.sh")
    assert (gspo.group_size, gspo.samples_per_step, gspo.steps) == (16, 8192, 200)  # 50 generations x k 4
    assert gspo.grpo["importance_sampling_level"] == "sequence" and gspo.grpo["loss_aggregation"] == "seq_mean_token_mean"
    assert (gspo.grpo["clip_eps"], gspo.grpo["clip_eps_high"], gspo.grpo["kl_beta"]) == (3e-4, 4e-4, 0.0)
    yaml_file = budget("verl", "ppo_trainer.yaml")
    assert (yaml_file.group_size, yaml_file.samples_per_step, yaml_file.steps) == (8, 2048, 400)
    assert (yaml_file.grpo["steps_per_generation"], yaml_file.grpo["inner_steps"], yaml_file.grpo["advantage"]) == (4, 2, "mean")


@pytest.mark.parametrize(
    ("override", "refused"),
    [
        ("algorithm.filter_groups.enable=true", "algorithm.filter_groups.enable: True: dynamic sampling"),
        ("data.gen_batch_size=3072", "data.gen_batch_size: 3072: samples 3072 prompts to train 1024"),
        ("algorithm.adv_estimator=gae", "algorithm.adv_estimator: 'gae': .*allowed: grpo, rloo"),
        ("algorithm.use_kl_in_reward=true", "use_kl_in_reward"),
        ("actor_rollout_ref.actor.policy_loss.loss_mode=gpg", "loss_mode: 'gpg': groupscale trains vanilla, gspo"),
        ("actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-sum", "loss_agg_mode: 'seq-mean-token-sum'"),
        ("actor_rollout_ref.rollout.n=1", "rollout.n: 1: GRPO samples G >= 2"),
        ("actor_rollout_ref.actor.entropy_coeff=0.01", "entropy_coeff: 0.01: an entropy bonus"),
    ],
)
def test_a_setting_that_changes_the_budget_or_the_objective_is_refused_naming_it(override, refused):
    with pytest.raises(Refused, match=refused):
        budget("verl", "run_grpo_8b.sh", override)


def test_a_refused_setting_can_be_dropped_and_the_notes_say_so():
    path = FIXTURES / "verl" / "run_grpo_8b.sh"
    spec, notes = spec_from(
        get_framework("verl"), path, ["algorithm.filter_groups.enable=true"], drop=["algorithm.filter_groups.enable"]
    )
    assert spec["samples_per_step"] == [5120]
    assert "dropped algorithm.filter_groups.enable: the sweep measures G without it" in notes


def test_an_imported_spec_is_a_valid_spec_with_the_files_own_g_among_its_group_sizes():
    spec, notes = spec_from(get_framework("verl"), FIXTURES / "verl" / "run_grpo_8b.sh", [], model="/models/q")
    assert spec["group_sizes"] == [5, 10, 20] and spec["samples_per_step"] == [5120]  # G divides B / k = 1280
    parsed = SweepSpec.model_validate({**spec, "task": {"name": "arithmetic"}, "model": {"preset": "tiny-llama"}})
    assert (parsed.grpo.steps_per_generation, parsed.grpo.kl_beta, parsed.engine) == (4, 0.001, "groupscale")
    assert notes[:2] == ["read run_grpo_8b.sh as verl (volcengine/verl@b178a3c, 2026-01)",
                         "case $DEVICE: only known when the script runs; read as 'gpu'"]  # fmt: skip
    assert any(n.startswith("not kept (3 settings") and "trainer.n_gpus_per_node" in n for n in notes)
    with pytest.raises(ValueError, match=r"--group-sizes: \[3\] do not give whole groups .* allowed: 2, 4, 5, 8"):
        spec_from(get_framework("verl"), FIXTURES / "verl" / "run_grpo_8b.sh", [], group_sizes=[3])


@pytest.mark.parametrize("file", ["run_grpo_8b.sh", "run_gspo.sh", "ppo_trainer.yaml"])
def test_recommend_config_changes_g_and_the_keys_tied_to_it_and_nothing_else(file, tmp_path):
    """The round trip: the file's objective measured, G = 2 back at the file's B: only n, the batch and the
    mini-batch (both in prompts) change, and the edited file reads back as G 2 at the same B, k and objective."""
    framework, path = get_framework("verl"), FIXTURES / "verl" / file
    before = file_budget(framework, path)
    text = edit_config(framework, path, 2, dict(before.grpo), before)
    prompts = before.samples_per_step // 2
    k = before.grpo["steps_per_generation"]
    keys = ("actor_rollout_ref.rollout.n=", "data.train_batch_size=", "actor_rollout_ref.actor.ppo_mini_batch_size=")
    if file.endswith(".yaml"):
        keys = ("n: ", "train_batch_size: ", "ppo_mini_batch_size: ")
    tail = " # prompts, 4 optimizer steps a generation" if file.endswith(".yaml") else ""
    expected = [f"{keys[0]}2", f"{keys[1]}{prompts}", f"{keys[2]}{prompts // k}{tail}"]
    assert sorted(changed_lines(path.read_text(), text)) == sorted(expected)
    edited = tmp_path / file
    edited.write_text(text)
    after = file_budget(framework, edited)
    assert (after.group_size, after.samples_per_step, after.grpo) == (2, before.samples_per_step, before.grpo)


def test_recommend_config_refuses_a_g_measured_for_another_objective():
    framework, path = get_framework("verl"), FIXTURES / "verl" / "run_gspo.sh"
    before = file_budget(framework, path)
    token_level = {**before.grpo, "importance_sampling_level": "token", "steps_per_generation": 1}
    with pytest.raises(ObjectiveDiffers, match="steps_per_generation: the sweep measured 1, the file trains 4; importance"):
        edit_config(framework, path, 8, token_level, before)


def test_spec_from_recognises_each_trainers_files():
    for name, files in {"verl": ["run_grpo_8b.sh", "run_gspo.sh", "ppo_trainer.yaml"]}.items():
        assert [recognise(FIXTURES / name / f).name for f in files] == [name] * len(files)
    assert set(FRAMEWORKS) >= {"verl"}

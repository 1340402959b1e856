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
from sweeps.spec.task import RewardSpec

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
        ("algorithm.filter_groups.enable=true", "algorithm.filter_groups.metric: None: .*allowed: seq_reward, seq_final_reward"),
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


def test_verls_filter_groups_is_dynamic_sampling_with_its_cap_and_an_unlimited_one_is_refused():
    """DAPO's recipe: filter_groups on a reward metric with max_num_gen_batches 10 -> grpo.dynamic_sampling; acc is read
    as the trained reward and said; verl's 0 (no limit) is refused naming the key."""
    path, on = FIXTURES / "verl" / "run_grpo_8b.sh", "algorithm.filter_groups.enable=true"
    spec, notes = spec_from(get_framework("verl"), path, [on, "algorithm.filter_groups.metric=acc",
                                                           "algorithm.filter_groups.max_num_gen_batches=10"])  # fmt: skip
    assert spec["grpo"]["dynamic_sampling"] == {"max_batches": 10} and spec["samples_per_step"] == [5120]
    assert any("metric acc read as the reward groupscale trains" in n for n in notes), notes
    assert any("max_num_gen_batches 10: a step short" in n for n in notes), notes
    parsed = SweepSpec.model_validate({**spec, "task": {"name": "arithmetic"}, "model": {"preset": "tiny-llama"}})
    assert parsed.grpo.dynamic_sampling.max_batches == 10
    assert budget("verl", "run_grpo_8b.sh").grpo.get("dynamic_sampling") is None  # off unless enabled
    got = budget(
        "verl", "run_grpo_8b.sh", on, "algorithm.filter_groups.metric=seq_reward", "algorithm.filter_groups.max_num_gen_batches=3"
    )
    assert got.grpo["dynamic_sampling"] == {"max_batches": 3}
    with pytest.raises(Refused, match=r"algorithm.filter_groups.max_num_gen_batches: 0: verl's <= 0 samples without limit"):
        budget("verl", "run_grpo_8b.sh", on, "algorithm.filter_groups.metric=score")
    with pytest.raises(Refused, match=r"algorithm.filter_groups.metric: 'entropy': .*allowed: seq_reward"):
        budget("verl", "run_grpo_8b.sh", on, "algorithm.filter_groups.metric=entropy")


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
    assert spec["answer"] == {"baseline_group_size": 5}  # the script's rollout.n: an answer keeps it or moves
    parsed = SweepSpec.model_validate({**spec, "task": {"name": "arithmetic"}, "model": {"preset": "tiny-llama"}})
    assert (parsed.grpo.steps_per_generation, parsed.grpo.kl_beta, parsed.engine) == (4, 0.001, "groupscale")
    assert notes[:2] == ["read run_grpo_8b.sh as verl (verl-project/verl@1dda039, 0.10.0.dev)",
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


def test_openrlhfs_dapo_script_counts_prompts_a_rollout_and_completions_an_optimizer_step():
    """rollout.batch_size 128 prompts x 8 = B 1024; train.batch_size 128 completions: k = 1024 / 128 = 8."""
    with pytest.raises(Refused, match="algo.dynamic_filtering_enable: True: dynamic filtering .* --drop algo.dynamic"):
        budget("openrlhf", "train_dapo.sh")
    got = budget("openrlhf", "train_dapo.sh", "algo.dynamic_filtering_enable=null")
    assert (got.group_size, got.samples_per_step, got.grpo["steps_per_generation"], got.grpo["inner_steps"]) == (8, 1024, 8, 1)
    assert (got.grpo["advantage"], got.grpo["loss_aggregation"], got.grpo["importance_sampling_level"]) == (
        "mean_std", "token_mean", "token")  # fmt: skip
    assert (got.grpo["clip_eps"], got.grpo["clip_eps_high"], got.grpo["kl_beta"], got.grpo["lr"]) == (0.2, 0.27, 1e-3, 5e-7)
    assert got.grpo["max_new_tokens"] == 2048  # no max_new_tokens: OpenRLHF generates up to data.max_len


def test_openrlhfs_flat_flags_of_before_the_rename_and_its_gspo():
    got = budget("openrlhf", "train_grpo_flat.sh")
    assert (got.group_size, got.samples_per_step, got.grpo["steps_per_generation"], got.grpo["inner_steps"]) == (4, 256, 4, 2)
    assert (got.grpo["advantage"], got.grpo["importance_sampling_level"], got.grpo["loss_aggregation"]) == (
        "loo", "sequence", "seq_mean_token_mean")  # fmt: skip
    assert (got.grpo["kl_beta"], got.grpo["max_new_tokens"], got.grpo["temperature"]) == (0.0, 1024, 0.7)
    assert budget("openrlhf", "train_grpo_flat.sh", "N_SAMPLES=8").samples_per_step == 512


@pytest.mark.parametrize(
    ("override", "refused"),
    [
        ("algo.kl.use_loss=false", "algo.kl.init_coef: 0.001: without --algo.kl.use_loss the KL is a reward penalty"),
        ("algo.kl.estimator=k2", "algo.kl.estimator: 'k2': groupscale's KL loss is k3"),
        ("algo.advantage.estimator=reinforce_baseline", "reinforce_baseline': whitens the advantages over the whole batch"),
        ("train.batch_size=100", r"train.batch_size: 100: .*1024 / 100 is not a whole number"),
        ("train.async_enable=true", "train.async_enable: True: asynchronous training"),
        ("actor.dual_clip=3", "actor.dual_clip"),
    ],
)
def test_openrlhf_settings_groupscale_cannot_train_are_refused_naming_them(override, refused):
    with pytest.raises(Refused, match=refused):
        budget("openrlhf", "train_dapo.sh", "algo.dynamic_filtering_enable=null", override)


@pytest.mark.parametrize(("file", "spelled"), [("train_dapo.sh", "--rollout."), ("train_grpo_flat.sh", "--")])
def test_openrlhf_recommend_config_moves_g_and_the_prompts_in_the_files_own_spelling(file, spelled, tmp_path):
    """train.batch_size counts completions: at a fixed B it stays; the prompts a rollout move with G."""
    framework, path = get_framework("openrlhf"), FIXTURES / "openrlhf" / file
    drop = ["algo.dynamic_filtering_enable=null"] if "dapo" in file else []
    before = file_budget(framework, path, tuple(drop))
    text = edit_config(framework, path, 16, dict(before.grpo), before)
    n, prompts = ("n_samples_per_prompt", "batch_size") if spelled != "--" else ("n_samples_per_prompt", "rollout_batch_size")
    assert sorted(changed_lines(path.read_text(), text)) == sorted(
        [f"{spelled}{n} 16", f"{spelled}{prompts} {before.samples_per_step // 16}"])  # fmt: skip
    assert "#   --rollout.n_samples_per_prompt 16" in text or "dapo" not in file  # a comment is never edited
    edited = tmp_path / file
    edited.write_text(text)
    after = file_budget(framework, edited, tuple(drop))
    assert (after.group_size, after.samples_per_step, after.grpo) == (16, before.samples_per_step, before.grpo)


def test_the_openrlhf_export_writes_its_flags_for_the_sweeps_objective():
    from sweeps.engines import Recipe
    from sweeps.exports import get_export
    from sweeps.spec import GRPOSpec

    grpo = GRPOSpec(advantage="mean_std", loss_aggregation="token_mean", kl_beta=1e-3, clip_eps_high=0.28, steps_per_generation=4)
    lines = [
        x
        for x in get_export("openrlhf").render(8, 1024, Recipe(grpo, grpo.steps_per_generation), "h").splitlines()
        if not x.startswith("#")
    ]
    assert lines[:6] == ["--rollout.n_samples_per_prompt 8", "--rollout.batch_size 128", "--train.batch_size 256",
                         "--train.max_epochs 1", "--algo.advantage.estimator group_norm",
                         "--actor.policy_loss_type ppo"]  # fmt: skip
    assert "--actor.eps_clip_low_high 0.2 0.28" in lines and "--algo.kl.use_loss" in lines and "--algo.kl.estimator k3" in lines
    with pytest.raises(ValueError, match="OpenRLHF cannot train what the sweep measured: advantage: 'loo_std'"):
        get_export("openrlhf").render(8, 1024, Recipe(GRPOSpec(advantage="loo_std")), "h")


def test_verls_gspo_aggregates_per_sequence_whatever_loss_agg_mode_says():
    """core_algos.py:1605: loss_mode gspo ignores loss_agg_mode; the export refuses a GSPO sweep of another aggregation."""
    got = budget("verl", "run_gspo.sh", "actor_rollout_ref.actor.loss_agg_mode=token-mean")
    assert got.grpo["loss_aggregation"] == "seq_mean_token_mean"
    with pytest.raises(Refused, match="verl's gspo aggregates seq-mean-token-mean only"):
        get_framework("verl").settings(8, 64, {"importance_sampling_level": "sequence", "loss_aggregation": "token_mean"})


def test_recommend_config_refuses_a_g_that_does_not_fill_the_files_b_or_another_temperature():
    framework, path = get_framework("verl"), FIXTURES / "verl" / "run_grpo_8b.sh"
    npu = file_budget(framework, path, ("DEVICE=npu",))  # B 80, k 1
    with pytest.raises(Refused, match=r"B \(completions per generation\): 80: must be whole groups of G = 3"):
        edit_config(framework, path, 3, dict(npu.grpo), npu)  # it wrote 26 prompts: B 78
    with pytest.raises(ObjectiveDiffers, match="temperature: the sweep measured 0.7, the file trains 1.0"):
        edit_config(framework, path, 10, {**npu.grpo, "temperature": 0.7}, npu)


def test_settings_that_shape_the_update_are_named_in_full_not_counted_with_the_infrastructure():
    _, notes = spec_from(get_framework("verl"), FIXTURES / "verl" / "run_gspo.sh", ["actor_rollout_ref.actor.grad_clip=0.01"])
    assert "not kept, and each may change what trains (groupscale's defaults train instead): " \
           "actor_rollout_ref.actor.grad_clip" in notes  # fmt: skip


PRIME_DROPS = ("orchestrator.async", "trainer.loss.type", "orchestrator.train.filter_zero_advantages")


@pytest.mark.parametrize(
    ("name", "file", "overrides", "drop", "prompts"),
    [
        ("openrlhf", "train_grpo_flat.sh", [], (), {"prompt_format": "raw"}),  # no --apply_chat_template
        ("openrlhf", "train_grpo_flat.sh", ["apply_chat_template=true"], (), {"prompt_format": "chat"}),
        ("openrlhf", "train_dapo.sh", ["data.apply_chat_template=true"], ("algo.dynamic_filtering_enable",),
         {"prompt_format": "chat"}),
        ("easyr1", "examples/config.yaml", [], (),
         {"prompt_format": "chat", "prompt_template": "easyr1/examples/format_prompt/math.jinja"}),
        ("nemo-rl", "examples/configs/grpo_math_1B.yaml", [], (),
         {"prompt_format": "chat", "prompt_template": "nemo-rl/examples/prompts/cot.txt"}),
        ("prime-rl", "rl.toml", [], PRIME_DROPS, {"prompt_format": "chat"}),
        ("verl", "run_grpo_8b.sh", [], (), {}),  # verl's data prompts are message lists: auto
        ("skyrl", "examples/train/gsm8k/run_gsm8k.sh", [], (), {}),
    ],
)  # fmt: skip
def test_an_import_gives_string_prompts_to_the_model_as_the_trainer_does(name, file, overrides, drop, prompts):
    spec, notes = spec_from(get_framework(name), FIXTURES / name / file, overrides, model="/models/q", drop=drop)
    task = {k: v for k, v in spec["task"].items() if k in ("prompt_format", "prompt_template")}
    assert task == {k: str(FIXTURES / v) if k == "prompt_template" else v for k, v in prompts.items()}
    said = [n for n in notes if "task.prompt_format" in n]
    assert said == ([f"string prompts as {get_framework(name).title} gives them to the model: task.prompt_format "
                     f"{prompts['prompt_format']}" + (f", formatted by task.prompt_template {task['prompt_template']}"
                                                      if "prompt_template" in task else "")] if prompts else [])  # fmt: skip


def test_a_prompt_template_the_config_names_but_that_is_not_here_is_said_and_left_out(tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text((FIXTURES / "easyr1" / "examples" / "config.yaml").read_text())
    spec, notes = spec_from(get_framework("easyr1"), config, [], model="/models/q")
    assert spec["task"]["prompt_format"] == "chat" and "prompt_template" not in spec["task"]
    assert "its prompt template './examples/format_prompt/math.jinja' is not here: put it under the data root and set " \
           "task.prompt_template" in notes  # fmt: skip


def found(file: str, name: str) -> str:
    return f"{FIXTURES / file}:{name}"


@pytest.mark.parametrize(
    ("name", "file", "overrides", "drop", "rewards", "prompt_column"),
    [
        ("openrlhf", "train_grpo_flat.sh", ["remote_rm_url=reward_func.py", "label_key=answer", "input_key=question"], (),
         [{"function": found("openrlhf/reward_func.py", "reward_func"), "convention": "openrlhf", "answer_column": "answer"}],
         "question"),
        ("openrlhf", "train_dapo.sh", ["--reward.remote_url", "http://rm:5000/get_reward,http://rm2:5000/get_reward",
                                       "--data.label_key", "solution"], ("algo.dynamic_filtering_enable",),
         [{"url": "http://rm:5000/get_reward", "request": "openrlhf", "answer_column": "solution"}], "input"),
        ("easyr1", "examples/config.yaml", [], (),  # its ./examples/reward_function/math.py from the repository's root
         [{"function": found("easyr1/examples/reward_function/math.py", "compute_score"), "convention": "easyr1",
           "answer_column": "answer"}], "prompt"),
        ("easyr1", "examples/qwen3_4b_geo3k_gspo.sh", ["worker.reward.reward_function=./examples/reward_function/math.py",
         "worker.reward.reward_function_kwargs={format_weight: 0.2}", "data.answer_key=solution", "data.prompt_key=problem"],
         (), [{"function": found("easyr1/examples/reward_function/math.py", "main"), "convention": "easyr1",
               "answer_column": "solution", "kwargs": {"format_weight": 0.2}}], "problem"),
        ("verl", "run_gspo.sh", ["reward.custom_reward_function.path=rewards/gsm8k.py", "data.prompt_key=question"], (),
         [{"function": found("rewards/gsm8k.py", "compute_score"), "convention": "verl"}], "question"),
        ("verl", "ppo_trainer.yaml", ["custom_reward_function.path=file://rewards/gsm8k.py",  # the legacy keys win
         "custom_reward_function.reward_kwargs={score: 2.0}", "reward.custom_reward_function.path=other.py"], (),
         [{"function": found("rewards/gsm8k.py", "compute_score"), "convention": "verl", "kwargs": {"score": 2.0}}],
         "prompt"),
        ("verl", "run_grpo_8b.sh", [], (), [{"function": "FILL IN: rewards.py:NAME"}], "prompt"),  # data_source scorers
        ("nemo-rl", "examples/configs/grpo_math_1B.yaml", ["data.default.env_name=math", "data.train.input_key=problem",
         "data.train.output_key=expected_answer"], (),
         [{"function": "FILL IN: NeMo-RL env math's scorer as rewards.py:NAME", "answer_column": "expected_answer"}],
         "problem"),
        ("prime-rl", "rl.toml", [], PRIME_DROPS,
         [{"function": "FILL IN: reverse_text.py:load_environment", "convention": "verifiers"}], "prompt"),
        ("skyrl", "examples/train/gsm8k/run_gsm8k.sh", ["environment.env_class=gsm8k"], (),
         [{"function": "FILL IN: skyrl_gym/envs/gsm8k/utils.py:compute_score", "convention": "verl",
           "answer_column": "reward_spec.ground_truth"}], "prompt"),
        ("skyrl", "examples/train/gsm8k/run_gsm8k.sh", [], (), [{"function": "FILL IN: rewards.py:NAME"}], "prompt"),
    ],
)  # fmt: skip
def test_an_import_carries_the_trainers_reward_and_its_columns(name, file, overrides, drop, rewards, prompt_column):
    """A reward file the config names is found from the config's folder or one above it, by its absolute path; a trainer
    whose rewards are environments gets a placeholder naming what to fill in, which the spec's pattern still takes."""
    spec, notes = spec_from(get_framework(name), FIXTURES / name / file, overrides, model="/models/q", drop=drop)
    assert spec["task"]["rewards"] == rewards and spec["task"]["prompt_column"] == prompt_column
    assert [RewardSpec.model_validate(entry) for entry in rewards]
    assert not [n for n in notes if "is not here" in n]
    said = [n for n in notes if n.startswith("rewards as")]
    shown = ", ".join(f"{key} {value}" for key, value in rewards[0].items())
    placeholder = rewards == [{"function": "FILL IN: rewards.py:NAME"}]  # the config names no reward
    assert said == ([] if placeholder else [f"rewards as {get_framework(name).title} scores them: task.rewards {shown}"])
    servers = [e["url"] for e in rewards if "url" in e]
    assert [n for n in notes if "GROUPSCALE_REWARD_URLS" in n] == [
        f"the reward server {url} is called from the Ray workers: the controller takes it when GROUPSCALE_REWARD_URLS "
        "holds a prefix of it"
        for url in servers
    ]


@pytest.mark.parametrize(
    ("name", "file", "overrides", "written"),
    [
        ("openrlhf", "train_grpo_flat.sh", ["remote_rm_url=reward_func.py"], "reward_func.py:reward_func"),
        ("easyr1", "examples/config.yaml", [], "./examples/reward_function/math.py:compute_score"),
        ("verl", "run_gspo.sh", ["reward.custom_reward_function.path=pkg://rewards.gsm8k"], "rewards/gsm8k.py:compute_score"),
    ],
)  # fmt: skip
def test_a_reward_file_the_config_names_that_is_not_here_is_kept_as_written_and_said(name, file, overrides, written, tmp_path):
    config = tmp_path / Path(file).name
    config.write_text((FIXTURES / name / file).read_text())
    spec, notes = spec_from(get_framework(name), config, overrides, model="/models/q")
    assert spec["task"]["rewards"][0]["function"] == written
    assert f"its reward file {written.rpartition(':')[0]!r} is not here: put it under the reward root " \
           "(GROUPSCALE_REWARD_ROOT) and set task.rewards[0].function" in notes  # fmt: skip


def test_verl_without_a_custom_reward_function_says_its_data_source_scorers_are_left_to_fill_in():
    _, notes = spec_from(get_framework("verl"), FIXTURES / "verl" / "run_grpo_8b.sh", [], model="/models/q")
    assert "no custom_reward_function: verl scores each row by its data_source with its built-in scorers " \
           "(verl/utils/reward_score/): fill in task.rewards with the one your data takes" in notes  # fmt: skip

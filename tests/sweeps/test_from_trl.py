"""TRL recipes as sweep specs (sweeps.from_trl): recipes written here in the shapes of TRL's docs and open-r1's
recipes, under engine trl (the recipe as it is) and engine groupscale (translated)."""

import pytest
import yaml

from sweeps.engines import get_engine
from sweeps.from_trl import SWEEP_OWNED, spec_from_trl
from sweeps.spec import SweepSpec
from sweeps.trial import TrialConfig
from sweeps.trl_steps import recipe_structure
from workers.engines.trl import trl_arguments

trl = pytest.importorskip("trl")
FIELDS = {f.name for f in __import__("dataclasses").fields(trl.GRPOConfig)}

# TRL's docs (clis.md): a recipe with no batch settings at all
DOCS = """
model_name_or_path: /models/Qwen2.5-0.5B
dataset_name: HuggingFaceH4/Polaris-Dataset-53K
reward_funcs:
  - accuracy_reward
"""
# open-r1's shape (recipes/*/grpo/config_demo.yaml): 8 processes, strings YAML 1.1 reads, hub and logging settings
OPEN_R1 = """
model_name_or_path: /models/DeepSeek-R1-Distill-Qwen-1.5B
model_revision: main
torch_dtype: bfloat16
attn_implementation: flash_attention_2
chat_template: "{{ bos_token }}{% for m in messages %}{{ m['content'] }}{% endfor %}"
dataset_name: open-r1/OpenR1-Math-220k
system_prompt: "You are a helpful AI Assistant."
bf16: true
use_vllm: true
do_eval: false
gradient_accumulation_steps: 4
gradient_checkpointing: true
gradient_checkpointing_kwargs:
  use_reentrant: false
hub_model_id: my-grpo
learning_rate: 1e-6
beta: 4e-2
log_completions: true
lr_scheduler_type: cosine_with_min_lr
lr_scheduler_kwargs:
  min_lr_rate: 0.1
max_completion_length: 8192
max_steps: -1
num_generations: 16
num_train_epochs: 1
output_dir: data/out
per_device_train_batch_size: 16
push_to_hub: true
report_to:
- wandb
reward_funcs: [accuracy, format]
reward_weights: [1.0, 0.5]
save_strategy: "epoch"
seed: 42
temperature: 0.7
warmup_ratio: 0.1
"""


def _trl_section_is_the_recipe(recipe: dict, spec: dict) -> None:
    """trl: holds every GRPOConfig field of the recipe as written, but those a sweep owns."""
    want = {k: v for k, v in recipe.items() if k in FIELDS and k not in SWEEP_OWNED}
    got = {k: v for k, v in spec["trl"].items() if not (k == "steps_per_generation" and "generation_batch_size" in recipe)}
    assert got == want


def test_trls_docs_recipe_gets_trls_defaults():
    recipe = yaml.safe_load(DOCS)
    spec, notes = spec_from_trl(recipe, [2, 4, 8], grpo_fields=FIELDS)
    assert spec["engine"] == "trl" and spec["samples_per_step"] == [8]  # TRL's per-device 8 on one process
    assert spec["answer"] == {"baseline_group_size": 8}  # GRPOConfig's default num_generations
    with pytest.raises(ValueError, match=r"num_generations: 'four' is not a group size; allowed: a whole number >= 2"):
        spec_from_trl({**recipe, "num_generations": "four"}, [2, 4, 8], grpo_fields=FIELDS)
    _trl_section_is_the_recipe(recipe, spec)
    assert spec["trl"] == {}
    assert any(n.startswith("dataset_name:") for n in notes) and any(n.startswith("reward_funcs:") for n in notes)
    SweepSpec.model_validate({**spec, "task": {"name": "arithmetic"}, "model": {"preset": "tiny-llama"}})


def test_an_open_r1_recipe_on_8_processes_keeps_its_settings_and_8192_tokens():
    recipe = yaml.safe_load(OPEN_R1)
    assert recipe["learning_rate"] == "1e-6" and recipe["beta"] == "4e-2"  # YAML 1.1: strings
    spec, notes = spec_from_trl(recipe, [4, 8, 16], num_processes=8, grpo_fields=FIELDS)
    assert spec["samples_per_step"] == [16 * 8 * 4]  # per-device 16 x 8 processes x accumulation 4: 512
    assert spec["answer"] == {"baseline_group_size": recipe["num_generations"]}  # the recipe's G: kept unless a move pays
    assert spec["resources"] == {"num_processes": 8}  # each trial trains on the recipe's 8 processes
    _trl_section_is_the_recipe(recipe, spec)
    assert spec["trl"]["max_completion_length"] == 8192 and spec["trl"]["learning_rate"] == "1e-6"
    assert spec["model"] == {
        "path": "/models/DeepSeek-R1-Distill-Qwen-1.5B",
        "dtype": "bfloat16",
        "attn_implementation": "flash_attention_2",
    }
    text = "\n".join(notes)
    said = ("push_to_hub", "hub_model_id", "report_to", "output_dir", "seed", "save_strategy", "num_generations")
    for owned in (*said, "reward_weights"):  # TRL got the recipe's and the terms' weights: every trial failed
        assert f"{owned}: " in text, owned
    assert "warmup_ratio: 0.1 (not a field of TRL's GRPOConfig" in text  # transformers 5 dropped it: said, not passed
    assert "system_prompt:" in text and "chat_template:" in text
    parsed = SweepSpec.model_validate({**spec, "task": {"name": "arithmetic"}, "model": {"preset": "tiny-llama"}})
    assert get_engine(parsed.engine).one_process_per_trial(parsed)  # use_vllm: each trial in a process of its own
    assert parsed.resources.num_processes == 8 and parsed.resources.cpus_per_trial == 8
    cfg = TrialConfig.first_of(parsed, "/cache")
    assert cfg.num_processes == 8 and trl_arguments(cfg)["per_device_train_batch_size"] == 16  # the recipe's, on 8


def test_steps_per_generation_above_accumulation_and_g_14_on_7_processes():
    recipe = {"model_name_or_path": "/m", "per_device_train_batch_size": 8, "gradient_accumulation_steps": 2,
              "steps_per_generation": 4, "num_generations": 14}  # fmt: skip
    spec, _ = spec_from_trl(recipe, [7, 14], num_processes=7, grpo_fields=FIELDS)
    assert spec["samples_per_step"] == [8 * 7 * 4]  # 224: a G = 14 recipe is swept at its own G
    _trl_section_is_the_recipe(recipe, spec)
    assert recipe_structure(spec["trl"]).optimizer_steps_per_generation == 2  # two optimizer steps per generation
    with_gbs = {"model_name_or_path": "/m", "per_device_train_batch_size": 8, "generation_batch_size": 256}
    spec, _ = spec_from_trl(with_gbs, [2, 4], num_processes=8, grpo_fields=FIELDS)
    assert spec["samples_per_step"] == [256] and spec["trl"] == {"per_device_train_batch_size": 8, "steps_per_generation": 4}
    with pytest.raises(ValueError, match=r"group sizes \[14\] do not divide B = 64"):
        spec_from_trl(
            {**recipe, "steps_per_generation": 8, "per_device_train_batch_size": 4}, [14], num_processes=2, grpo_fields=FIELDS
        )


# TRL's docs/source/paper_index.md, DeepSeekMath: 16 generations of 4 x 16 completions... split into 16 minibatches
DEEPSEEKMATH = """
model_name_or_path: /m
loss_type: grpo
beta: 0.001
epsilon: 10.0
num_generations: 16
max_completion_length: 32768
steps_per_generation: 16
per_device_train_batch_size: 4
gradient_accumulation_steps: 128
"""


def test_a_recipe_with_several_generations_per_optimizer_step_is_swept_as_trl_trains_it():
    """steps_per_generation 16 below gradient_accumulation_steps 128: each optimizer step takes 8 generations of 64
    completions (512). engine trl keeps it, B the generation batch; engine groupscale samples the step's 512 at once."""
    recipe = yaml.safe_load(DEEPSEEKMATH)
    spec, _ = spec_from_trl(recipe, [8, 16, 32], grpo_fields=FIELDS)
    assert spec["samples_per_step"] == [64]
    _trl_section_is_the_recipe(recipe, spec)
    parsed = SweepSpec.model_validate({**spec, "task": {"name": "arithmetic"}, "model": {"preset": "tiny-llama"}})
    structure = recipe_structure(parsed.trl_recipe)
    assert (structure.completions_per_optimizer_step, structure.steps_per_generation) == (512, 16)
    assert structure.describe().startswith("each optimizer step takes 8 generations of 64 completions (512)")
    with pytest.raises(ValueError, match=r"epsilon: 10.0: Input should be less than 1"):  # R1's clip 10: TRL's alone
        spec_from_trl(recipe, [8, 16, 32], grpo_fields=FIELDS, engine="groupscale")
    translated, _ = spec_from_trl({**recipe, "epsilon": 0.2}, [8, 16, 32], grpo_fields=FIELDS, engine="groupscale")
    assert translated["samples_per_step"] == [512]


def test_the_groupscale_engine_translates_with_trls_defaults_and_names_what_it_cannot_keep():
    recipe = yaml.safe_load(OPEN_R1) | {"mask_truncated_completions": True, "max_grad_norm": "0.2", "steps_per_generation": 8}
    spec, notes = spec_from_trl(recipe, [4, 8], engine="groupscale", num_processes=8)
    parsed = SweepSpec.model_validate({**spec, "task": {"name": "arithmetic"}, "model": {"preset": "tiny-llama"}})
    # 16 x 8 x 8 = 1024 completions a generation in 2 optimizer steps of 512: groupscale's engine trains them so
    assert (parsed.samples_per_step, parsed.grpo.steps_per_generation) == ([1024], 2)
    assert (parsed.grpo.loss_aggregation, parsed.grpo.advantage) == ("token_mean", "mean_std")  # TRL's dapo, group
    assert (parsed.grpo.lr, parsed.grpo.kl_beta, parsed.grpo.max_grad_norm, parsed.grpo.max_new_tokens) == (1e-6, 0.04, 0.2, 8192)
    assert parsed.grpo.gradient_checkpointing is True and parsed.grpo.temperature == 0.7
    text = "\n".join(notes)
    assert "mask_truncated_completions: refused" in text and "reward_weights: [1.0, 0.5]" in text
    assert "steps_per_generation" not in text  # kept, not a note
    assert "log_completions: True (groupscale's trainer has no such setting" in text
    with pytest.raises(ValueError, match="loss_type: 'cispo'"):
        spec_from_trl(recipe | {"loss_type": "cispo"}, [4], engine="groupscale")


UNSLOTH = """\
learning_rate: 5e-6
optim: adamw_8bit
per_device_train_batch_size: 1
gradient_accumulation_steps: 1
num_generations: 6
max_prompt_length: 256
max_completion_length: 200
max_steps: 250
output_dir: outputs
model_name_or_path: /models/Qwen2.5-3B-Instruct
"""


def test_an_unsloth_batch_of_one_is_refused_saying_how_b_is_made_and_what_to_change():
    """Unsloth's notebooks set per_device_train_batch_size 1 (Unsloth raises it to num_generations itself): the
    refusal used to end in "allowed: " with nothing after it."""
    with pytest.raises(ValueError) as e:
        spec_from_trl(yaml.safe_load(UNSLOTH), [2, 4, 8], grpo_fields=FIELDS)
    message = str(e.value)
    assert message.startswith("group sizes [2, 4, 8] do not divide B = 1: each generation of 1 completions")
    assert "per_device_train_batch_size 1 x 1 process(es) x gradient_accumulation_steps 1" in message
    assert message.endswith("raise per_device_train_batch_size to the largest G at least (Unsloth does so itself) or "
                            "set generation_batch_size")  # fmt: skip


def test_an_rloo_config_is_refused_as_another_objective_and_the_rloo_fields_are_trls():
    """RLOOConfig recipes were read as GRPO ones; its trainer clips a summed-log-prob ratio, its KL is in the reward."""
    import dataclasses

    from sweeps.from_trl import RLOO_ONLY

    assert RLOO_ONLY == {f.name for f in dataclasses.fields(trl.RLOOConfig)} - FIELDS  # the installed TRL's
    recipe = {**yaml.safe_load(DOCS), "num_generations": 4, "normalize_advantages": True}
    with pytest.raises(ValueError, match="normalize_advantages: an RLOOConfig recipe .* advantage loo"):
        spec_from_trl(recipe, [2, 4])


def test_a_trl_import_gives_string_prompts_as_they_are():
    """TRL templates a conversational prompt and never a string one: task.prompt_format raw."""
    spec, _ = spec_from_trl({"model_name_or_path": "/models/q"}, [2, 4], grpo_fields=FIELDS)
    assert spec["task"]["prompt_format"] == "raw"

import typing
from pathlib import Path

import pytest
from pydantic import ValidationError

from sweeps.engines import get_engine
from sweeps.planner import plan_trials
from sweeps.spec import SweepSpec, load_spec, valid_group_sizes
from sweeps.spec.sections import AnswerMethodName
from tests.factories import spec

EXAMPLES = Path(__file__).resolve().parents[2] / "sweeps" / "examples"


def errors(data):
    with pytest.raises(ValidationError) as e:
        SweepSpec.model_validate(data)
    return e.value.errors()


def test_group_size_not_dividing_budget_names_field_and_valid_sizes():
    (err,) = errors(spec(group_sizes=[3], samples_per_step=[64]))
    assert err["loc"] == ("group_sizes",)
    assert "valid group sizes for B=64: 2, 4, 8, 16, 32, 64" in err["msg"]


@pytest.mark.parametrize(
    "resources, per_process, per_trial",
    [
        ({}, (1.0, 0.0), (1.0, 0.0)),
        ({"cpus_per_trial": 4, "gpus_per_trial": 1}, (4.0, 1.0), (4.0, 1.0)),  # one process: the same numbers
        ({"num_processes": 2}, (1.0, 0.0), (2.0, 0.0)),  # a process's default, times P
        ({"num_processes": 4, "gpus_per_process": 1, "cpus_per_process": 2}, (2.0, 1.0), (8.0, 4.0)),
        ({"num_processes": 2, "gpus_per_trial": 2, "cpus_per_trial": 6}, (3.0, 1.0), (6.0, 2.0)),  # the trial's, split
        ({"num_processes": 2, "cpus_per_trial": 4, "cpus_per_process": 2}, (2.0, 0.0), (4.0, 0.0)),  # both, agreeing
    ],
)
def test_resources_per_process_and_per_trial_are_one_fact(resources, per_process, per_trial):
    """A trial of P processes: cpus_per_trial = P x cpus_per_process (likewise GPUs), whichever was given; the stored
    spec, read again, is the same spec."""
    res = SweepSpec.model_validate(spec(resources=resources)).resources
    assert (res.cpus_per_process, res.gpus_per_process) == per_process
    assert (res.cpus_per_trial, res.gpus_per_trial) == per_trial
    stored = SweepSpec.model_validate(spec(resources=resources))
    assert SweepSpec.model_validate(stored.model_dump()) == stored


def test_processes_that_disagree_or_outnumber_the_groups_are_refused_naming_what_is_allowed():
    (err,) = errors(spec(resources={"num_processes": 2, "cpus_per_trial": 3, "cpus_per_process": 1}))
    assert err["loc"] == ("resources",)
    assert "cpus_per_trial=3 is not num_processes x cpus_per_process = 2 x 1" in err["msg"]
    (err,) = errors(spec(group_sizes=[2, 4, 8], samples_per_step=[16], resources={"num_processes": 4}))
    assert err["loc"] == ("resources",)  # G=8 at B=16: 2 groups for 4 processes
    assert "G=8 at B=16 gives 2 groups" in err["msg"] and "allowed at B=16: G in [2, 4]" in err["msg"]
    assert SweepSpec.model_validate(spec(group_sizes=[2, 4], samples_per_step=[16], resources={"num_processes": 4}))
    # Ray refuses amounts finer than 0.0001 when the actor is made (every launch failed): said at the field given
    (err,) = errors(spec(resources={"num_processes": 4, "cpus_per_trial": 1e-7}))
    assert err["loc"] == ("resources", "cpus_per_trial") and "steps of 0.0001" in err["msg"]
    (err,) = errors(spec(resources={"num_processes": 513}))  # only its own error: nothing derived from it
    assert err["loc"] == ("resources", "num_processes")


@pytest.mark.parametrize(
    "over, loc, words",
    [
        ({"group_sizes": [1, 2]}, ("group_sizes", 0), "greater than or equal to 2"),
        ({"task": {"name": "chess"}}, ("task",), "'arithmetic'"),
        ({"model": {"preset": "gpt-9"}}, ("model", "preset"), "'tiny-llama'"),
        ({"model": {}}, ("model",), "exactly one"),
        ({"model": {"preset": "tiny-llama", "path": "/m"}}, ("model",), "exactly one"),
        ({"grpo": {"temperature": 0}}, ("grpo", "temperature"), "greater than 0"),
        ({"grpo": {"advantage": "magic"}}, ("grpo", "advantage"), "'loo'"),
        ({"seeds": [0, 0]}, ("seeds",), "repeated"),
        ({"steps": 10**9}, ("steps",), "less than or equal"),
        ({"bogus": 1}, ("bogus",), "not permitted"),
        ({"eval": {"every": "often"}}, ("eval", "every"), "allowed: auto, an integer 0..100000 (steps), or null"),
        ({"eval": {"every": -1}}, ("eval", "every"), "allowed: auto, an integer 0..100000"),
        ({"eval": {"every": True}}, ("eval", "every"), "allowed: auto"),
    ],
)
def test_bad_fields_are_named_with_what_is_allowed(over, loc, words):
    errs = errors(spec(**over))
    assert any(e["loc"][: len(loc)] == loc and words in e["msg"] for e in errs), errs


def test_the_eval_checkpoints_default_to_a_few_and_every_0_or_null_turns_them_off():
    """eval.every auto (the default): every ceil(T / 4) steps, so at most 4 evals after step 0; 0 and null: T only;
    a stored spec written before the default (every: null) keeps meaning none."""
    assert SweepSpec.model_validate(spec(steps=150)).eval.checkpoints(150) == [38, 76, 114, 150]
    assert SweepSpec.model_validate(spec(steps=10)).eval.every == "auto"
    assert [SweepSpec.model_validate(spec(steps=t)).eval.checkpoints(t) for t in (1, 3, 10)] == [[1], [1, 2, 3], [3, 6, 9, 10]]
    for off in (0, None):
        assert SweepSpec.model_validate(spec(steps=150, eval={"every": off})).eval.checkpoints(150) == [150]
    assert SweepSpec.model_validate(spec(steps=150, eval={"every": 50})).eval.checkpoints(150) == [50, 100, 150]


def test_valid_group_sizes_are_divisors_from_two():
    assert valid_group_sizes(12) == [2, 3, 4, 6, 12]


@pytest.mark.parametrize("path", sorted(EXAMPLES.rglob("*.yaml")), ids=lambda p: str(p.relative_to(EXAMPLES)))
def test_examples_are_valid(path):
    s = load_spec(path)
    grid = len(s.group_sizes) * len(s.samples_per_step) * len(s.seeds)
    assert len(plan_trials(s)) == grid and s.n_trials == (s.adaptive.max_trials if s.mode == "adaptive" else grid)


def test_the_byo_examples_paths_are_relative_to_its_file():
    s = load_spec(EXAMPLES / "byo" / "spec.yaml")
    assert s.task.path == str(EXAMPLES / "byo" / "train.parquet") and Path(s.task.path).is_file()
    assert s.task.rewards[0].function == f"{EXAMPLES / 'byo' / 'rewards.py'}:accuracy"


def test_load_spec_rejects_yaml_tags(tmp_path):
    p = tmp_path / "s.yaml"
    p.write_text("name: !!python/object/apply:os.system ['echo hi']\n")
    with pytest.raises(Exception, match="could not determine a constructor"):
        load_spec(p)


def test_planner_one_trial_per_point_with_whole_prompts():
    s = SweepSpec.model_validate(spec(group_sizes=[2, 4, 8], samples_per_step=[16, 32], seeds=[0, 1]))
    plans = plan_trials(s)
    assert len(plans) == 12 == len({p.key for p in plans})
    assert all(p.prompts_per_step * p.group_size == p.samples_per_step for p in plans)


@pytest.mark.parametrize(
    "over, loc, words",
    [
        ({"mode": "adaptive"}, ("mode",), "at least 3 group_sizes"),
        ({"mode": "bayes"}, ("mode",), "'grid' or 'adaptive'"),
        (
            {"mode": "adaptive", "group_sizes": [2, 4, 8], "adaptive": {"max_trials": 2}},
            ("adaptive", "max_trials"),
            "greater than or equal to 3",
        ),
        (  # 6 distinct G (the default initial_points) x 2 budgets
            {
                "mode": "adaptive",
                "group_sizes": [2, 4, 8, 16, 32, 64],
                "samples_per_step": [64, 128],
                "adaptive": {"max_trials": 11},
            },
            ("adaptive",),
            "adaptive.max_trials=11 cannot hold the initial design (6 distinct G x 2 budgets = 12 trials); allowed: at least 12",
        ),
        (  # at least the 4 G the law needs, even with initial_points 3
            {"mode": "adaptive", "group_sizes": [2, 4, 8, 16], "adaptive": {"max_trials": 3, "initial_points": 3}},
            ("adaptive",),
            "(4 distinct G x 1 budget = 4 trials); allowed: at least 4",
        ),
        ({"tune_lr": {"low": 1e-2, "high": 1e-3}}, ("tune_lr",), "must be greater than tune_lr.low"),
        ({"tune_lr": {"low": 1e-3}}, ("tune_lr", "high"), "Field required"),
        (
            {"tune_lr": {"low": 1e-4, "high": 1e-3}, "measure": {"kind": "gradient_mse"}},
            ("tune_lr",),
            "needs measure.kind outcome",
        ),
    ],
)
def test_adaptive_and_tune_lr_errors_name_the_field(over, loc, words):
    (err,) = errors(spec(**over))
    assert err["loc"] == loc and words in err["msg"], err


def test_adaptive_budget_is_the_progress_total_and_tuning_counts_every_g_and_b():
    s = SweepSpec.model_validate(
        spec(
            mode="adaptive",
            group_sizes=[2, 4, 8],
            samples_per_step=[16, 32],
            adaptive={"max_trials": 7},
            tune_lr={"low": 1e-4, "high": 1e-3, "trials": 5},
        )
    )
    assert s.n_trials == 7 and s.n_tuning_trials == 5 * 3 * 2


@pytest.mark.parametrize(
    "trl, ours",
    [
        ({"epsilon": 0.3}, {"clip_eps": 0.3}),
        ({"epsilon_high": 0.28}, {"clip_eps_high": 0.28}),
        ({"beta": 0.04}, {"kl_beta": 0.04}),
        ({"num_iterations": 2}, {"inner_steps": 2}),
        ({"max_completion_length": 16}, {"max_new_tokens": 16}),
        ({"learning_rate": 1e-6}, {"lr": 1e-6}),
        ({"loss_type": "grpo"}, {"loss_aggregation": "seq_mean_token_mean"}),
        ({"loss_type": "dapo"}, {"loss_aggregation": "token_mean"}),
        ({"loss_type": "bnpo"}, {"loss_aggregation": "token_mean"}),
        ({"loss_type": "dr_grpo"}, {"loss_aggregation": "seq_mean_token_sum_norm"}),
        ({"scale_rewards": "group"}, {"advantage": "mean_std"}),
        ({"scale_rewards": True}, {"advantage": "mean_std"}),
        ({"scale_rewards": "none"}, {"advantage": "mean"}),
        ({"scale_rewards": False}, {"advantage": "mean"}),
    ],
)
def test_trl_names_mean_the_same_and_are_shown_back_under_ours(trl, ours):
    got = SweepSpec.model_validate(spec(grpo=trl))
    assert got == SweepSpec.model_validate(spec(grpo=ours))
    dumped = got.model_dump()["grpo"]
    assert not set(trl) & set(dumped) and all(dumped[k] == v for k, v in ours.items())


@pytest.mark.parametrize(
    "grpo, words",
    [
        ({"epsilon": 0.3, "clip_eps": 0.2}, "give epsilon (TRL's name) or clip_eps, not both"),
        ({"beta": 0.1, "kl_beta": 0.1}, "give beta (TRL's name) or kl_beta, not both"),
        ({"scale_rewards": "batch"}, "scale_rewards 'batch' is refused"),
        ({"scale_rewards": 1}, "allowed: group, none"),
        ({"loss_type": "cispo"}, "allowed: grpo, dapo, bnpo, dr_grpo"),
    ],
)
def test_bad_trl_names_are_refused_naming_the_setting(grpo, words):
    (err,) = errors(spec(grpo=grpo))
    assert err["loc"] == ("grpo",) and words in err["msg"]


@pytest.mark.parametrize(
    "over, loc, words",
    [
        ({"stepz": 3}, ("stepz",), "unknown field 'stepz' (did you mean steps?); allowed: name, task, model"),
        ({"grpo": {"temprature": 1.0}}, ("grpo", "temprature"), "(did you mean temperature?)"),
        ({"grpo": {"bta": 1.0}}, ("grpo", "bta"), "(did you mean beta or kl_beta?)"),  # TRL's names are allowed names
        ({"task": {"name": "arithmetic", "maxoperand": 3}}, ("task", "arithmetic", "maxoperand"), "did you mean max_operand?"),
        ({"eval": {"xyz": 1}}, ("eval", "xyz"), "unknown field 'xyz'; allowed: prompts, samples_per_prompt"),
    ],
)
def test_an_unknown_field_names_the_allowed_ones_and_the_closest(over, loc, words):
    from sweeps.spec import error_message

    (err,) = errors(spec(**over))
    assert err["loc"] == loc and words in error_message(err)


def _dataset(rewards, **task):
    return spec(task={"name": "dataset", "path": "data.parquet", "rewards": rewards, **task}, model={"preset": "chat-tiny"})


def test_a_spec_file_with_built_in_rewards_loads_and_reward_files_resolve_where_they_are(tmp_path):
    """A built-in reward in a spec *file* was turned into a function path; a reward FILE that is not beside the
    spec stays relative, for the server to resolve against its GROUPSCALE_REWARD_ROOT."""
    (tmp_path / "here.py").write_text("def f(completions, **kw):\n    return [0.0] * len(completions)\n")
    text = (
        "name: s\ntask:\n  name: dataset\n  path: data.parquet\n  rewards:\n"
        "    - {name: numeric_match, answer_column: solution}\n    - {function: here.py:f}\n    - {function: on_server.py:g}\n"
        "model: {preset: chat-tiny}\ngroup_sizes: [2]\nsamples_per_step: [4]\n"
    )
    (tmp_path / "spec.yaml").write_text(text)
    rewards = load_spec(tmp_path / "spec.yaml").task.rewards
    assert (rewards[0].name, rewards[0].function, rewards[0].answer_column) == ("numeric_match", None, "solution")
    assert rewards[1].function == f"{tmp_path / 'here.py'}:f" and rewards[2].function == "on_server.py:g"


@pytest.mark.parametrize(
    "entry, words",
    [
        ({"name": "numeric_match", "kwargs": {"a": 1}}, "kwargs and convention belong to a function entry"),
        ({"name": "exact_match", "convention": "verl"}, "kwargs and convention belong to a function entry"),
        ({"function": "r.py:f", "convention": "trl", "answer_column": "solution"}, "answer_column belongs to built-ins and"),
        ({"function": "r.py:f", "convention": "rllm"}, "'auto', 'trl', 'verl', 'openrlhf', 'easyr1', 'verifiers' or 'http'"),
        ({"name": "exact_match", "retries": 5}, "retries belong to a reward server entry (url)"),
        ({"url": "http://h:1/r", "answer_column": "a"}, "answer_column belongs to request: openrlhf"),
        ({"url": "ftp://h/r"}, "String should match pattern"),
        ({"url": "http://h:1/r", "name": "exact_match"}, "got name, url"),
        ({"function": "r.py:f", "convention": "http"}, "convention http is a reward server's: give its url"),
        ({"url": "http://h:1/r", "convention": "verl"}, "kwargs and convention belong to a function entry"),
        ({"function": "r.py"}, "String should match pattern"),
    ],
)
def test_reward_entries_are_checked(entry, words):
    (err,) = errors(_dataset([entry]))
    assert err["loc"][:4] == ("task", "dataset", "rewards", 0) and words in err["msg"], err


def test_reward_entries_keep_verl_and_factory_settings_and_read_old_stored_specs():
    rewards = [
        {
            "function": "s.py:compute_score",
            "convention": "verl",
            "answer_column": "reward_model.ground_truth",
            "kwargs": {"m": 1},
        },
        {"function": "f.py:get_reward", "kwargs": {"max_len": 8}},
        {"function": "old.py:f", "convention": "trl", "answer_column": "answer"},  # stored before it became optional
        {"name": "exact_match", "convention": "trl"},  # stored before convention: auto, when every entry had trl
    ]
    parsed = SweepSpec.model_validate(_dataset(rewards)).task.rewards
    assert (parsed[0].convention, parsed[0].answer_column, parsed[0].kwargs) == ("verl", "reward_model.ground_truth", {"m": 1})
    assert parsed[1].kwargs == {"max_len": 8} and parsed[1].convention == "auto" and parsed[2].answer_column is None
    assert parsed[2].convention == "trl" and parsed[3].convention == "auto"


def test_chat_template_kwargs_are_template_variables_only():
    ok = SweepSpec.model_validate(spec(model={"preset": "chat-tiny", "chat_template_kwargs": {"enable_thinking": False}}))
    assert ok.model.chat_template_kwargs == {"enable_thinking": False}
    (err,) = errors(spec(model={"preset": "chat-tiny", "chat_template_kwargs": {"tokenize": True}}))
    assert err["loc"] == ("model", "chat_template_kwargs") and "tokenize: set by groupscale" in err["msg"]


@pytest.mark.parametrize(
    "over, loc, words",
    [
        ({"trl": {"beta": 0.04}}, ("trl",), "trl: holds GRPOConfig fields for engine trl"),
        ({"engine": "trl", "task": {"name": "bandit"}, "model": {"preset": "tabular"}}, ("trl",), "does not take task bandit"),
        ({"engine": "trl", "tune_lr": {"low": 1e-5, "high": 1e-3}}, ("trl",), "engine trl does not take tune_lr"),
        ({"engine": "trl", "grpo": {"lr": 1e-5}}, ("trl",), "engine trl does not take grpo: ['lr'] (TRL reads trl:)"),
        (
            {"engine": "trl", "trl": {"steps_per_generation": 4}, "samples_per_step": [18], "group_sizes": [2]},
            ("trl",),
            "samples_per_step 18 cannot feed the recipe's 4",
        ),
        ({"engine": "trl", "trl": {"generation_batch_size": 16, "steps_per_generation": 2}}, ("trl",), "cannot both be set"),
        ({"engine": "trl", "trl": {"reward_weights": [1.0, 0.5]}}, ("trl",), "set weight: on each entry instead"),
        ({"model": {"preset": "tabular", "lora": {}}, "task": {"name": "bandit"}}, ("model",), "model.lora adapts a language"),
        ({"probe": {"parameters": "lora"}}, ("probe",), "probe.parameters lora takes scores over the adapter: set model.lora"),
        ({"model": {"preset": "tiny-llama", "lora": {"r": 0}}}, ("model", "lora", "r"), "greater than or equal to 1"),
        ({"grpo": {"max_new_tokens": 200_000}}, ("grpo", "max_new_tokens"), "less than or equal to 131072"),
        (
            {"engine": "trl", "grpo": {"dynamic_sampling": {"max_batches": 4}}},
            ("trl",),
            "engine trl does not take grpo.dynamic_sampling (TRL's GRPOTrainer has no group filter",
        ),
        (
            {"grpo": {"dynamic_sampling": {"max_batches": 4}, "advantage": "oracle"}},
            ("trl",),
            "grpo.dynamic_sampling: advantage oracle gives a group of equal rewards a non-zero advantage",
        ),
        (
            {"grpo": {"dynamic_sampling": {"max_batches": 4}, "allocation": "per_prompt"}},
            ("trl",),
            "grpo.allocation allowed: uniform",
        ),
        ({"grpo": {"dynamic_sampling": {"max_batches": 0}}}, ("grpo", "dynamic_sampling", "max_batches"), "greater than or"),
        ({"tokens_per_step": 0}, ("tokens_per_step",), "greater than or equal to 1"),
        ({"tokens_per_step": 40, "samples_per_step": [16, 32]}, ("tokens_per_step",), "give one value, got [16, 32]"),
        ({"engine": "trl", "tokens_per_step": 40}, ("tokens_per_step",), "engine trl samples a fixed number of completions"),
        (
            {"tokens_per_step": 40, "grpo": {"dynamic_sampling": {"max_batches": 4}}},
            ("tokens_per_step",),
            "grpo.dynamic_sampling sizes each step by its own rule",
        ),
        ({"tokens_per_step": 40, "grpo": {"allocation": "per_prompt"}}, ("tokens_per_step",), "grpo.allocation uniform"),
        ({"tokens_per_step": 65, "grpo": {"max_new_tokens": 4}}, ("tokens_per_step",), "hold 64; allowed: at most 64"),
        (  # a generation of k steps needs k Z tokens from its B completions
            {"tokens_per_step": 40, "grpo": {"max_new_tokens": 4, "steps_per_generation": 2}},
            ("tokens_per_step",),
            "needs 80 tokens, but its 16 completions (samples_per_step) of at most 4 tokens (grpo.max_new_tokens) hold 64; "
            "allowed: at most 32",
        ),
        ({"tokens_per_step": 3}, ("tokens_per_step",), "spends 4 tokens a step; allowed: at least 4"),
    ],
)
def test_engine_trl_and_lora_errors_name_the_setting(over, loc, words):
    (err,) = errors(spec(**over))
    assert err["loc"] == loc and words in err["msg"], err


def test_an_engine_trl_spec_keeps_the_recipe_as_written():
    recipe = {"learning_rate": "1e-6", "beta": "4e-2", "per_device_train_batch_size": 4, "max_completion_length": 8192}
    parsed = SweepSpec.model_validate(spec(engine="trl", trl=recipe, model={"preset": "tiny-llama", "lora": {"r": 8}}))
    assert parsed.trl == recipe and parsed.engine == "trl" and not get_engine("trl").one_process_per_trial(parsed)
    assert parsed.model.lora.model_dump() == {"r": 8, "alpha": 32.0, "dropout": 0.05, "target_modules": "all-linear"}
    assert get_engine("trl").one_process_per_trial(SweepSpec.model_validate(spec(engine="trl", trl={"use_vllm": True})))


def test_a_stored_engine_trl_spec_validates_again():
    """The store keeps model_dump() (every grpo field at its default) and parses it again for every answer."""
    parsed = SweepSpec.model_validate(spec(engine="trl", trl={"beta": 0.04}))
    assert SweepSpec.model_validate(parsed.model_dump(mode="json")) == parsed


def test_answer_method_is_a_registered_name_and_an_unknown_one_lists_them():
    from sweeps.answer import DEFAULT_METHOD, METHODS

    base = spec()
    assert SweepSpec.model_validate(base).answer.method == DEFAULT_METHOD == "tracking"  # the spec's default, the registry's
    for name in METHODS:
        assert SweepSpec.model_validate({**base, "answer": {"method": name}}).answer.method == name
    with pytest.raises(ValidationError) as e:
        SweepSpec.model_validate({**base, "answer": {"method": "oracle"}})
    err = e.value.errors()[0]
    assert err["loc"] == ("answer", "method") and "'staged' or 'tracking'" in err["msg"]
    assert set(typing.get_args(AnswerMethodName)) == set(METHODS)  # the spec's names are the registry's


def test_solution_str_belongs_to_verl_scorers():
    from sweeps.spec.task import RewardSpec

    assert RewardSpec(function="c.py:compute_score", convention="verl", solution_str="prompt_and_response")
    assert RewardSpec(function="c.py:compute_score", solution_str="prompt_and_response")  # auto may find verl
    with pytest.raises(ValidationError, match="solution_str belongs to convention: verl"):
        RewardSpec(function="r.py:f", convention="trl", solution_str="prompt_and_response")


@pytest.mark.parametrize(
    "extra, field", [({"measure": {"kind": "gradient_mse"}}, "measure"), ({"resources": {"num_processes": 2}}, "resources")]
)
def test_per_prompt_allocation_is_refused_where_groups_must_be_uniform(extra, field):
    spec = {"name": "x", "task": {"name": "bandit"}, "model": {"preset": "tabular"}, "group_sizes": [2, 4],
            "samples_per_step": [48], "grpo": {"allocation": "per_prompt"}, **extra}  # fmt: skip
    with pytest.raises(ValidationError) as e:
        SweepSpec(**spec)
    assert [err["loc"][0] for err in e.value.errors()] == [field] and "grpo.allocation" in str(e.value)
    assert SweepSpec(**{**spec, **{k: {} for k in extra}}).grpo.allocation == "per_prompt"


def test_dynamic_sampling_is_refused_with_a_measure_of_the_unfiltered_gradient_and_kept_in_the_dump():
    from tests.factories import bandit_mse_spec

    (err,) = errors(bandit_mse_spec(grpo={"dynamic_sampling": {"max_batches": 4}}))
    assert err["loc"] == ("trl",) and "measure.kind allowed: outcome" in err["msg"], err
    ok = SweepSpec.model_validate(spec(grpo={"dynamic_sampling": {"max_batches": 4}, "steps_per_generation": 2}))
    assert ok.grpo.dynamic_sampling.max_batches == 4
    assert SweepSpec.model_validate(ok.model_dump()) == ok and SweepSpec.model_validate(spec()).grpo.dynamic_sampling is None


def test_a_token_budget_is_kept_in_the_dump_and_asks_its_own_question():
    from service.identity import question

    ok = SweepSpec.model_validate(spec(tokens_per_step=40))
    assert ok.tokens_per_step == 40 and SweepSpec.model_validate(ok.model_dump()) == ok
    assert question(ok) != question(SweepSpec.model_validate(spec())) and question(ok)["tokens_per_step"] == 40

"""Users' reward files as TRL, open-r1 and verl write them, loaded and called in the reward process.

The files are under tests/fixtures/user_material/rewards (see its README): package-relative and sibling
imports, a name bound by an import from TRL, factories, async rewards, log_metric / log_extra, math_verify's
signal-based timeouts, verl's compute_score, and what the check at submit must refuse.
"""

import shutil
import threading
import time

import pytest
from mlflow.utils.validation import _validate_metric_name

from tests.user_material import REWARDS, verl_rows, word_problem_rows, write_parquet
from workers.entry import check_rewards_task, checked_indices
from workers.rewards import RewardError, TrainerState, trl_kwargs
from workers.rewards.loading import load_function
from workers.rewards.process import RewardProcess
from workers.rewards.terms import term_names
from workers.tasks import make_task

PLAIN, BROKEN = REWARDS / "plain", REWARDS / "broken"


def _chat_kwargs(texts, solutions, **extra):
    """TRL's keyword arguments for conversational completions ``texts`` of rows with ``solution`` (and ``extra``)."""
    rows = [{"solution": s, **extra} for s in solutions]
    prompts = [[{"role": "user", "content": "q"}]] * len(texts)
    return trl_kwargs(prompts, texts, [[1] * (i + 1) for i in range(len(texts))], rows, True, TrainerState(3, 10))


def _score(specs, texts, solutions, **extra):
    process = RewardProcess(specs)
    try:
        return process.score(_chat_kwargs(texts, solutions, **extra), len(texts))
    finally:
        process.close()


TEXTS, SOLUTIONS = ["3 + 4 = 7 pens. #### 7", "#### 8", "no answer"], ["7", "7", "7"]


def test_package_relative_imports_resolve_in_a_package_folder():
    """``from ..import_utils import`` (TRL's accuracy_rewards.py) and ``from .parsing import`` (open-r1's rewards.py)."""
    got = _score([{"function": f"{REWARDS / 'mathpkg/rewards/accuracy.py'}:accuracy_reward"}], TEXTS, SOLUTIONS)
    assert got.per_function["accuracy.accuracy_reward"].tolist() == [1.0, 0.0, 0.0]


def test_a_file_in_a_plain_folder_imports_the_file_beside_it_both_ways():
    got = _score([{"function": f"{PLAIN / 'siblings.py'}:format_reward", "weight": 2.0}], TEXTS, SOLUTIONS)
    assert got.rewards.tolist() == [1.0, 1.0, 0.0]


def test_a_name_bound_by_an_import_from_trl_is_a_reward():
    specs = [{"function": f"{PLAIN / 'uses_trl.py'}:think_format_reward"}]
    got = _score(specs, ["<think>\nplan\n</think>\n#### 7", "#### 7", "x"], SOLUTIONS)
    assert got.rewards.tolist() == [1.0, 0.0, 0.0]


def test_a_factory_is_called_once_with_its_kwargs_and_its_result_is_the_reward():
    specs = [
        {"function": f"{PLAIN / 'factories.py'}:get_length_penalty", "kwargs": {"max_len": 2, "penalty": -0.5}},
        {"function": f"{PLAIN / 'factories.py'}:get_bonus", "kwargs": {"value": 0.125}},  # a callable class
        {
            "function": f"{PLAIN / 'uses_trl.py'}:get_soft_overlong_punishment",
            "kwargs": {"max_completion_len": 3, "soft_punish_cache": 1},
        },
    ]
    got = _score(specs, TEXTS, SOLUTIONS)  # completion_ids of lengths 1, 2, 3
    assert got.per_function["factories.get_length_penalty"].tolist() == [-0.25, -0.5, -0.5]
    assert got.per_function["factories.get_bonus"].tolist() == [0.125] * 3
    assert got.per_function["uses_trl.get_soft_overlong_punishment"].tolist() == [0.0, 0.0, -1.0]  # TRL's own factory
    # without kwargs a factory is called as a reward, as TRL would call it: the check says so
    failure = RewardProcess([specs[0] | {"kwargs": None, "convention": "trl"}]).check(_chat_kwargs(TEXTS, SOLUTIONS), 3)
    assert failure is not None and "unexpected keyword argument" in str(failure) and failure.index == 0
    # under convention auto it takes no convention's arguments: refused naming them and the signature it has
    with pytest.raises(RewardError, match=r"none of the reward conventions \(openrlhf: .*trl: .*get_length_penalty\(max_len"):
        RewardProcess([specs[0] | {"kwargs": None}])


def test_async_rewards_are_awaited_together_with_the_others():
    specs = [
        {"function": f"{PLAIN / 'async_rewards.py'}:graded_remotely"},
        {"function": f"{PLAIN / 'siblings.py'}:format_reward"},
    ]
    got = _score(specs, TEXTS, SOLUTIONS)
    assert got.per_function["async_rewards.graded_remotely"].tolist() == [1.0, 0.0, 0.0]
    assert got.rewards.tolist() == [1.5, 0.5, 0.0]


def test_log_metric_and_log_extra_come_back_with_the_rewards():
    got = _score([{"function": f"{PLAIN / 'logging_rewards.py'}:logged_length"}], TEXTS, SOLUTIONS)
    assert got.extras == {"chars": [len(t) for t in TEXTS]}
    assert got.logged == {"mean_chars": pytest.approx(sum(map(len, TEXTS)) / 3), "progress": pytest.approx(0.3)}


def test_math_verify_with_its_default_timeouts_runs_in_the_reward_process():
    """parse/verify with signal-based timeouts fail off a main thread, where trials run: the reward process is
    what makes the built-in and a direct call work."""
    verified = load_function(f"{PLAIN / 'math_direct.py'}:verified")  # in this process, to show what fails
    errors = []
    thread = threading.Thread(target=lambda: errors.append(_raises(verified, [[{"content": "1"}]], ["1"])))
    thread.start()
    thread.join()
    assert "threaded environment" in errors[0]  # the failure this process avoids
    texts = [r"so $\boxed{\frac{1}{2}}$", r"\boxed{3}", "0.5"]
    specs = [{"function": f"{PLAIN / 'math_direct.py'}:verified"}, {"name": "math_verify", "answer_column": "solution"}]
    got = RewardProcess(specs).score(_chat_kwargs(texts, ["0.5"] * 3), 3)
    assert got.per_function["math_direct.verified"].tolist() == [1.0, 0.0, 1.0]
    assert got.per_function["math_verify"].tolist() == [1.0, 0.0, 1.0]


def _raises(fn, *args) -> str:
    try:
        fn(*args)
    except Exception as e:  # noqa: BLE001
        return str(e)
    return ""


def test_verl_scorers_get_verls_arguments_from_nested_columns(tmp_path):
    rows = verl_rows(12)
    path = write_parquet(rows, tmp_path / "train.parquet")
    truths = [r["reward_model"]["ground_truth"] for r in rows]
    task = make_task(
        {
            "name": "dataset",
            "path": str(path),
            "rewards": [
                {"function": f"{PLAIN / 'verl_score.py'}:compute_score", "convention": "verl"},
                {"function": f"{PLAIN / 'verl_score.py'}:gsm8k_score", "convention": "verl", "kwargs": {"method": "flexible"}},
                {"name": "numeric_match", "answer_column": "reward_model.ground_truth"},
            ],
        }
    )
    problems = task.train_support()[0][:3]
    truth = {p.columns["extra_info"]["index"]: p.columns["reward_model"]["ground_truth"] for p in problems}
    texts = [f"so #### {truth[p.columns['extra_info']['index']]}" for p in problems[:2]] + [
        str(truth[problems[2].columns["extra_info"]["index"]])
    ]
    got = task.score(problems, texts)
    assert got.per_function["verl_score.compute_score"].tolist() == [1.0, 1.0, 0.0]  # strict: after "#### "
    assert got.per_function["verl_score.gsm8k_score"].tolist() == [1.0, 1.0, 1.0]  # reward_kwargs: method flexible
    assert got.per_function["numeric_match"].tolist() == [1.0, 1.0, 1.0]  # a built-in on the dotted path
    assert got.extras["source"] == ["openai/gsm8k"] * 3  # the dict's other keys are log_extra columns
    assert got.extras["row"] == [p.columns["extra_info"]["index"] for p in problems]
    assert set(truth.values()) <= set(truths)
    task.close()


def test_metric_keys_of_any_file_name_are_valid_mlflow_keys_and_unique():
    specs = [
        {"function": f"{PLAIN / 'my+rewards(v2).py'}:constant"},
        {"function": "/x/a@b,c.py:f"},
        {"function": "/x/..py:f"},
        {"function": "/y/a@b,c.py:f"},
        {"name": "numeric_match", "answer_column": "a"},
        {"name": "numeric_match", "answer_column": "b"},
    ]
    names = term_names(specs)
    keys = [key for _, key in names]
    assert keys == ["my_rewards_v2_.constant", "a_b_c.f", "_.f", "a_b_c.f_2", "numeric_match", "numeric_match_2"]
    for key in keys:
        _validate_metric_name(f"reward/{key}")  # raises on a key MLflow refuses
    assert names[0][0] == "my+rewards(v2).py:constant"  # messages keep the file's own name
    got = _score(specs[:1], TEXTS, SOLUTIONS)
    assert got.per_function["my_rewards_v2_.constant"].tolist() == [0.25] * 3


def test_an_edited_reward_file_is_loaded_afresh_and_same_named_modules_stay_apart(tmp_path):
    for name, value in (("a", 1.0), ("b", 2.0)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "rewards.py").write_text(f"def r(completions, **kw):\n    return [{value}] * len(completions)\n")
    specs = [{"function": f"{tmp_path / 'a/rewards.py'}:r"}, {"function": f"{tmp_path / 'b/rewards.py'}:r"}]
    got = _score(specs, TEXTS, SOLUTIONS)
    assert [v[0] for v in got.per_function.values()] == [1.0, 2.0]  # two rewards.py in one process, each its own
    (tmp_path / "a" / "rewards.py").write_text("def r(completions, **kw):\n    return [5.0] * len(completions)\n")
    assert _score(specs[:1], TEXTS, SOLUTIONS).rewards.tolist() == [5.0] * 3


def test_a_reward_process_that_dies_is_a_reward_error_naming_its_exit_code(tmp_path):
    (tmp_path / "dies.py").write_text("import os\n\ndef r(completions, **kw):\n    os._exit(3)\n")
    process = RewardProcess([{"function": f"{tmp_path / 'dies.py'}:r"}])
    with pytest.raises(RewardError, match=r"the reward process ended \(exit code 3\)"):
        process.score(_chat_kwargs(TEXTS, SOLUTIONS), 3)


def test_a_reward_that_prints_does_not_disturb_the_process(tmp_path, capfd):
    (tmp_path / "loud.py").write_text(
        "def r(completions, **kw):\n    print('graded', len(completions))\n    return [1.0] * len(completions)\n"
    )
    assert _score([{"function": f"{tmp_path / 'loud.py'}:r"}], TEXTS, SOLUTIONS).rewards.tolist() == [1.0] * 3
    assert "graded 3" in capfd.readouterr().out


@pytest.mark.parametrize(
    ("entry", "index", "message"),
    [
        (
            {"function": f"{BROKEN / 'missing_package.py'}:reward"},
            0,
            "ModuleNotFoundError: No module named 'groupscale_not_a_real_package' "
            "(pip install groupscale-not-a-real-package on every Ray worker)",
        ),
        ({"function": f"{BROKEN / 'wrong.py'}:one_argument", "convention": "trl"}, 0, "wrong.py:one_argument raised TypeError"),
        ({"function": f"{BROKEN / 'wrong.py'}:a_number"}, 0, "returned a float, not a list of 2 floats"),
        ({"function": f"{BROKEN / 'wrong.py'}:too_few"}, 0, "returned 1 values for 2 completions"),
        ({"function": f"{BROKEN / 'wrong.py'}:get_reward", "kwargs": {"scale": 3}}, 0, "ValueError: scale 3 is not allowed"),
        ({"function": f"{BROKEN / 'wrong.py'}:reads_a_missing_column"}, 0, "missing 1 required keyword-only|required positional"),
        (
            {"function": f"{BROKEN / 'wrong.py'}:nothing_here"},
            0,
            "wrong.py defines no callable 'nothing_here'; its callables: ['a_number'",
        ),
    ],
)
def test_the_check_at_submit_names_the_reward_and_the_cause(tmp_path, entry, index, message):
    path = write_parquet(word_problem_rows(4), tmp_path / "train.parquet")
    good = {"function": f"{PLAIN / 'siblings.py'}:format_reward"}
    task = {"name": "dataset", "path": str(path), "prompt_column": "prompt", "rewards": [good, entry]}
    start = time.monotonic()
    failure = check_rewards_task(task, timeout_s=50)
    assert time.monotonic() - start < 60
    assert failure is not None and failure["index"] == 1, failure
    assert any(part in failure["message"] for part in message.split("|")), failure
    assert check_rewards_task({**task, "rewards": [good]}, timeout_s=50) == {"conventions": ["trl"]}  # what auto took


def test_the_check_gives_up_on_a_reward_that_hangs(tmp_path):
    path = write_parquet(word_problem_rows(4), tmp_path / "train.parquet")
    (tmp_path / "slow.py").write_text("import time\n\ndef r(completions, **kw):\n    time.sleep(600)\n")
    start = time.monotonic()
    failure = check_rewards_task(
        {"name": "dataset", "path": str(path), "rewards": [{"function": f"{tmp_path / 'slow.py'}:r"}]}, 3
    )
    assert failure == {
        "index": None,
        "message": "the reward functions were not loaded and called on 2 rows within 3 s",
        "with": "placeholder completions",
    }
    assert time.monotonic() - start < 15


def test_a_copied_package_does_not_hide_behind_an_installed_one(tmp_path):
    """A package folder named as an installed module that the reward process imported first is named, not mixed up."""
    (tmp_path / "numpy").mkdir()
    (tmp_path / "numpy" / "__init__.py").write_text("")
    (tmp_path / "numpy" / "r.py").write_text("def r(completions, **kw):\n    return [0.0] * len(completions)\n")
    with pytest.raises(RewardError, match=r"r.py is in package 'numpy', but an installed module of that name"):
        RewardProcess([{"function": f"{tmp_path / 'numpy/r.py'}:r"}])
    shutil.rmtree(tmp_path / "numpy")


def test_a_file_taken_out_of_its_package_says_to_keep_it_in_the_package(tmp_path):
    """TRL's accuracy_rewards.py copied alone: ``from ..import_utils`` cannot resolve; the message says what to do."""
    shutil.copy(REWARDS / "mathpkg/rewards/accuracy.py", tmp_path / "accuracy.py")
    with pytest.raises(RewardError, match=r"ImportError: attempted relative import beyond top-level package; the file "
                       r"imports package-relatively .* keep it in its package folder"):  # fmt: skip
        RewardProcess([{"function": f"{tmp_path / 'accuracy.py'}:accuracy_reward"}])


def test_a_verl_scorer_folder_is_refused_only_when_a_scorer_imports_the_name_it_hides(tmp_path):
    """verl's reward_score folder: its math_verify.py (which imports the math-verify package) beside scorers that never
    import it was refused; now only a scorer that imports math_verify (itself, or through a module of the folder) is,
    and the folder goes after the installed packages, so the built-in math_verify still gets the package."""
    (tmp_path / "math_verify.py").write_text(
        "from math_verify import parse, verify\n\ndef compute_score(model_output, ground_truth):\n    return 0.0\n"
    )
    (tmp_path / "gsm8k.py").write_text("import re\n\ndef compute_score(solution_str, ground_truth):\n    return 0.0\n")
    (tmp_path / "dispatch.py").write_text(
        "def compute_score(data_source, solution_str, ground_truth):\n    from . import gsm8k\n"
        "    return gsm8k.compute_score(solution_str, ground_truth)\n"
    )
    (tmp_path / "uses_math.py").write_text("def r(completions, **kw):\n    from . import math_verify  # noqa\n    return []\n")
    (tmp_path / "direct.py").write_text("from math_verify import parse  # noqa\n\ndef r(completions, **kw):\n    return []\n")
    builtin = {"name": "math_verify", "answer_column": "solution"}
    scored = _score(
        [{"function": f"{tmp_path / 'gsm8k.py'}:compute_score", "convention": "verl", "answer_column": "solution"},
         {"function": f"{tmp_path / 'dispatch.py'}:compute_score", "convention": "verl", "answer_column": "solution"},
         builtin],
        TEXTS, SOLUTIONS, data_source="openai/gsm8k",
    )  # fmt: skip
    assert scored.per_function["math_verify"].tolist() == [1.0, 0.0, 0.0]  # the package, not the folder's file
    for name in ("uses_math.py", "direct.py"):
        with pytest.raises(RewardError, match=rf"math_verify in .* has the name of an installed package, and {name} imports"):
            RewardProcess([{"function": f"{tmp_path / name}:r"}, builtin])
    (tmp_path / "__init__.py").write_text("")  # a package folder: its files are imported as the package's
    RewardProcess([{"function": f"{tmp_path / 'direct.py'}:r"}]).close()


def test_verls_batched_scorer_is_named_as_the_convention_groupscale_does_not_call(tmp_path):
    """verl's compute_score_batched got "missing 4 required positional arguments"; now the convention is named."""
    (tmp_path / "batched.py").write_text(
        "def compute_score_batched(data_sources, solution_strs, ground_truths, extra_infos):\n"
        "    return [0.0 for _ in solution_strs]\n"
    )
    with pytest.raises(RewardError, match=r"batched.py:compute_score_batched takes verl's batched convention .* give the "
                       r"per-completion compute_score\(data_source"):  # fmt: skip
        RewardProcess([{"function": f"{tmp_path / 'batched.py'}:compute_score_batched", "convention": "verl"}])


def test_the_check_at_submit_reaches_every_data_source(tmp_path):
    """A verl dispatcher on mixed MATH / NuminaMath rows: the scorer of the third row's source needs a package the
    workers lack; reading two rows, the check passed and every trial failed."""
    rows = verl_rows(6)
    rows[4] = {**rows[4], "data_source": "AI-MO/NuminaMath-CoT"}
    path = write_parquet(rows, tmp_path / "mixed.parquet")
    (tmp_path / "dispatch.py").write_text(
        "def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n"
        "    if data_source == 'AI-MO/NuminaMath-CoT':\n"
        "        import groupscale_not_a_real_latex_package  # noqa: F401\n"
        "    return 0.0\n"
    )
    task = {"name": "dataset", "path": str(path), "rewards": [{"function": f"{tmp_path / 'dispatch.py'}:compute_score",
                                                             "convention": "verl"}]}  # fmt: skip
    failure = check_rewards_task(task, timeout_s=50)
    assert failure is not None and "No module named 'groupscale_not_a_real_latex_package' (pip install " in failure["message"]
    assert (
        "groupscale-not-a-real-latex-package on every Ray worker) (reached on row 4 of the data, data_source "
        in failure["message"]
    )
    assert failure["message"].endswith("data_source 'AI-MO/NuminaMath-CoT')"), failure
    assert [rows[i]["data_source"] for i in checked_indices(rows)] == ["openai/gsm8k"] * 2 + ["AI-MO/NuminaMath-CoT"]


COUNTDOWN = '''\
import re


def compute_score(solution_str, ground_truth, format_score=0.1, score=1.0):
    """TinyZero's countdown scorer, shortened: it reads the prompt and the response decoded together."""
    if "Assistant:" not in solution_str:
        return 0
    found = re.findall(r"<answer>(.*?)</answer>", solution_str.split("Assistant:", 1)[1])
    if not found:
        return 0
    used = sorted(int(n) for n in re.findall(r"\\d+", found[-1]))
    if used != sorted(ground_truth["numbers"]):
        return format_score
    return score if eval(found[-1], {"__builtins__": None}, {}) == ground_truth["target"] else format_score
'''


def test_a_tinyzero_scorer_gets_the_prompt_and_the_response_together(tmp_path):
    """A right equation scored 0 (the scorer looks for "Assistant:", which is in the prompt): with
    ``solution_str: prompt_and_response`` it scores 1, and by default it still gets the response alone."""
    (tmp_path / "countdown.py").write_text(COUNTDOWN)
    rows = [{"prompt": f"User: make {a + b} from [{a}, {b}]. Assistant: Let me solve this step by step.",
             "data_source": "countdown", "reward_model": {"ground_truth": {"target": a + b, "numbers": [a, b]}}}
            for a, b in [(3, 4), (5, 6), (1, 8), (2, 2), (7, 9)]]  # fmt: skip
    path = write_parquet(rows * 4, tmp_path / "countdown.parquet")
    entry = {"function": f"{tmp_path / 'countdown.py'}:compute_score", "convention": "verl"}
    for solution_str, want in (("prompt_and_response", [1.0, 1.0, 0.1]), ("response", [0.0, 0.0, 0.0])):
        task = make_task({"name": "dataset", "path": str(path), "eval_fraction": 0.2,
                          "rewards": [{**entry, "solution_str": solution_str}]})  # fmt: skip
        problems = task.train_support()[0][:3]
        truths = [p.columns["reward_model"]["ground_truth"] for p in problems]
        texts = [f"<answer>{t['numbers'][0]} + {t['numbers'][1]}</answer>" for t in truths[:2]]
        texts.append(f"<answer>{truths[2]['numbers'][0]} * {truths[2]['numbers'][1]}</answer>")  # a wrong equation
        want = want if truths[2]["numbers"][0] * truths[2]["numbers"][1] != truths[2]["target"] else want[:2] + [1.0]
        assert task.score(problems, texts).per_function["countdown.compute_score"].tolist() == want, solution_str
        task.close()


MULTIPLY = '''\
import re


def compute_score(solution_str, ground_truth, method="strict", format_score=0.1, score=1.0):
    """TinyZero's multiply scorer (verl/utils/reward_score/multiply.py), without its random prints."""
    if "Assistant:" not in solution_str:
        return 0
    found = re.findall(r"<answer>(.*?)</answer>", solution_str.split("Assistant:", 1)[1])
    try:
        answer = int(found[-1].strip()) if found else None
    except ValueError:
        answer = None
    if answer is None:
        return 0
    return score if answer == int(ground_truth) else format_score
'''


def test_the_check_at_submit_scores_each_rows_reference_answer(tmp_path):
    """TinyZero's multiply scorer reads the answer after "Assistant:", which is in the prompt: with solution_str
    response it scores even the reference 0, and the check says which solution_str scores it; a scorer that scores
    nothing is named with the column it read; countdown's {target, numbers} holds no answer to write, so it is skipped."""
    (tmp_path / "multiply.py").write_text(MULTIPLY)
    (tmp_path / "countdown.py").write_text(COUNTDOWN)
    (tmp_path / "never.py").write_text("def compute_score(solution_str, ground_truth):\n    return 0.0\n")
    prompt = "User: Give me the answer of {a} * {b}; return it in <answer> </answer> tags. Assistant: Let me solve this."
    rows = [{"prompt": prompt.format(a=a, b=b), "data_source": "multiply", "reward_model": {"ground_truth": str(a * b)}}
            for a, b in [(12, 3), (7, 8), (9, 9)]]  # fmt: skip
    path = write_parquet(rows, tmp_path / "multiply.parquet")
    countdown_rows = [{**r, "reward_model": {"ground_truth": {"target": 24, "numbers": [3, 8]}}} for r in rows]
    counting = write_parquet(countdown_rows, tmp_path / "countdown.parquet")

    def check(file, path, **entry):
        return check_rewards_task({"name": "dataset", "path": str(path), "rewards": [
            {"name": "exact_match", "answer_column": "data_source"}, {"function": f"{tmp_path / file}:compute_score", **entry}]},
            timeout_s=50)  # fmt: skip

    failure = check("multiply.py", path)
    assert failure["index"] == 1 and failure["with"].startswith("completions that hold each row's reference answer")
    assert "with solution_str: response; with solution_str: prompt_and_response it scores them" in failure["message"]
    assert check("multiply.py", path, solution_str="prompt_and_response") == {"conventions": ["builtin", "verl"]}
    assert check("countdown.py", counting, solution_str="prompt_and_response") == {"conventions": ["builtin", "verl"]}
    failure = check("never.py", path, convention="verl")
    assert (
        failure["index"] == 1
        and "never.py:compute_score gives no checked row's reference answer a positive score (2 " in failure["message"]
    )
    assert "it read 'reward_model.ground_truth' (the first: '36')" in failure["message"]
    assert (
        '"... #### A", "\\boxed{A}", "<answer>A</answer>", "A" with solution_str: response and prompt_and_response'
        in failure["message"]
    )

"""Dataset tasks: every file format gives the same rows; rewards the TRL way; built-ins on reasoning text."""

import inspect
import json
import math
import os
import re

import numpy as np
import pytest
from datasets import Dataset, DatasetDict

from workers.data import DatasetError, check_rows, load_rows
from workers.rewards import RewardError, TrainerState, compute_rewards, final_answer, numeric_match
from workers.rewards.loading import build_terms
from workers.rewards.terms import WeightedReward
from workers.tasks import make_task

ROWS = [{"prompt": f"What is {i} + {i}?", "solution": str(2 * i), "level": i % 3} for i in range(12)]
CHAT = [{"prompt": [{"role": "user", "content": f"What is {i} + 1?"}], "solution": str(i + 1)} for i in range(12)]


def _write_all(folder, rows, with_csv=True):
    ds = Dataset.from_list(rows)
    paths = {"jsonl": folder / "d.jsonl", "json": folder / "d.json", "parquet": folder / "d.parquet", "disk": folder / "disk"}
    ds.to_json(str(paths["jsonl"]))
    ds.to_json(str(paths["json"]), lines=False)
    ds.to_parquet(str(paths["parquet"]))
    ds.save_to_disk(str(paths["disk"]))
    paths["arrow"] = next((folder / "disk").glob("*.arrow"))
    DatasetDict({"train": ds, "test": ds.select(range(2))}).save_to_disk(str(folder / "dict"))
    if with_csv:
        paths["csv"] = folder / "d.csv"
        ds.to_csv(str(paths["csv"]), index=False)
    return paths


def test_every_supported_format_gives_the_same_rows(tmp_path):
    paths = _write_all(tmp_path, ROWS)
    for kind, path in paths.items():
        rows = load_rows(path)
        if kind == "csv":  # CSV has no types: numbers come back as numbers
            rows = [{**r, "solution": str(r["solution"])} for r in rows]
        assert rows == ROWS, kind
    assert load_rows(tmp_path / "dict", split="train") == ROWS
    assert load_rows(tmp_path / "dict", split="test") == ROWS[:2]


def test_conversational_rows_survive_every_format_that_holds_lists(tmp_path):
    for kind, path in _write_all(tmp_path, CHAT, with_csv=False).items():
        rows = load_rows(path)
        assert [r["prompt"] for r in rows] == [r["prompt"] for r in CHAT], kind
        check_rows(rows, "prompt", ["solution"])


def test_bad_datasets_name_the_field_and_what_was_found(tmp_path):
    paths = _write_all(tmp_path, ROWS, with_csv=False)
    with pytest.raises(DatasetError, match=r"no column 'question'; its columns: \['level', 'prompt', 'solution'\]") as e:
        check_rows(load_rows(paths["parquet"]), "question")
    assert e.value.field == "prompt_column"
    with pytest.raises(DatasetError, match=r"splits \['test', 'train'\]") as e:
        load_rows(tmp_path / "dict")
    assert e.value.field == "split"
    (tmp_path / "x.txt").write_text("secret content")
    with pytest.raises(DatasetError, match="unsupported file type '.txt'") as e:
        load_rows(tmp_path / "x.txt")
    assert "secret" not in str(e.value)
    (tmp_path / "bad.parquet").write_text("secret content, not parquet")
    with pytest.raises(DatasetError, match="cannot be read") as e:
        load_rows(tmp_path / "bad.parquet")
    assert "secret" not in str(e.value)
    with pytest.raises(DatasetError, match="must hold a string or a non-empty list"):
        check_rows([{"prompt": 3}], "prompt")


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("3 + 4 = 7 apples. #### 7", "7"),  # GSM8K: after ####
        ("First 12, then 30. #### 42", "42"),  # not the first number
        (r"so $x = \boxed{\frac{1}{2}}$ and 5", r"\frac{1}{2}"),  # MATH: the last \boxed{}
        (r"\boxed{3} then \boxed{1{,}000}", "1{,}000"),
        ("I count 3, then 5, so 11", "11"),  # else the last number
        ("no number here", "no number here"),
    ],
)
def test_final_answer(text, answer):
    assert final_answer(text) == answer


def test_numeric_match_takes_the_final_answer():
    assert numeric_match("Tom has 12 - 4 = 8 stamps. #### 8", "8") == 1.0
    assert numeric_match("Tom has 12 - 4 = 8 stamps. #### 8", "12") == 0.0  # the first number is not the answer
    assert numeric_match(r"the sum is \boxed{42}.", "42") == 1.0
    assert numeric_match("1,000 or 2,500", "2500") == 1.0
    assert numeric_match("4.20e1", "42") == 1.0 and numeric_match("nothing", "1") == 0.0
    assert numeric_match("#### 7", "#### 7") == 1.0  # a GSM8K-style reference works too


# From TRL's documentation (GRPOTrainer, "Using a custom reward function"), unchanged.
def reward_func(completions, ground_truth, **kwargs):
    # Regular expression to capture content inside \boxed{}
    matches = [re.search(r"\\boxed\{(.*?)\}", completion) for completion in completions]
    contents = [match.group(1) if match else "" for match in matches]
    # Reward 1 if the content is the same as the ground truth, 0 otherwise
    return [1.0 if c == t else 0.0 for c, t in zip(contents, ground_truth)]


def format_reward_func(completions, **kwargs):
    """Reward function that checks if the completion has a specific format."""
    pattern = r"^<think>.*?</think><answer>.*?</answer>$"
    completion_contents = [completion[0]["content"] for completion in completions]
    matches = [re.match(pattern, content) for content in completion_contents]
    return [1.0 if match else 0.0 for match in matches]


# The reward file the workers import: TRL's two functions above, as they are, and a few that misbehave.
TRL_DOCS = (
    "import math\nimport re\n\n\n"
    + inspect.getsource(reward_func)
    + "\n\n"
    + inspect.getsource(format_reward_func)
    + """

def abstain_on_odd(completions, level, **kwargs):
    return [None if lv % 2 else 1.0 for lv in level]

def raises(completions, **kwargs):
    raise KeyError("solution")

def too_few(completions, **kwargs):
    return [1.0]

def not_finite(completions, **kwargs):
    return [math.inf] * len(completions)
"""
)


@pytest.fixture
def reward_file(tmp_path):
    path = tmp_path / "trl_rewards.py"
    path.write_text(TRL_DOCS)
    return path


def _task(tmp_path, rows, rewards, **options):
    path = tmp_path / "data.parquet"
    Dataset.from_list(rows).to_parquet(str(path))
    return make_task({"name": "dataset", "path": str(path), "rewards": rewards, **options})


def test_trl_reward_functions_from_its_docs_run_unchanged(tmp_path, reward_file):
    # TRL's standard format: prompts and completions are strings
    standard = _task(tmp_path, [{"prompt": "q", "ground_truth": "4"}] * 10, [{"function": f"{reward_file}:reward_func"}])
    got = standard.score(standard.eval_problems(1) * 3, [r"so \boxed{4}", r"\boxed{5}", "4"])
    assert got.rewards.tolist() == [1.0, 0.0, 0.0] and got.abstained == 0
    assert reward_func([r"so \boxed{4}", r"\boxed{5}", "4"], ["4"] * 3) == got.rewards.tolist()  # as TRL would compute
    # TRL's conversational format: completions are [{"role": "assistant", "content": ...}]
    chat = _task(
        tmp_path,
        [{"prompt": [{"role": "user", "content": "q"}]}] * 10,
        [{"function": f"{reward_file}:format_reward_func", "weight": 0.5}],
    )
    texts = ["<think>a</think><answer>4</answer>", "4"]
    got = chat.score(chat.eval_problems(1) * 2, texts)
    assert got.rewards.tolist() == [0.5, 0.0]
    assert format_reward_func([[{"role": "assistant", "content": t}] for t in texts]) == [1.0, 0.0]


def test_rewards_get_every_column_and_none_abstains(tmp_path, reward_file):
    task = _task(
        tmp_path, ROWS, [{"function": f"{reward_file}:abstain_on_odd"}, {"name": "numeric_match", "answer_column": "solution"}]
    )
    problems = [q for q in task.train_support()[0] if q.columns["level"] in (0, 1)][:4]
    texts = [f"#### {q.columns['solution']}" for q in problems]
    got = task.score(problems, texts)
    want = [2.0 if q.columns["level"] == 0 else 1.0 for q in problems]
    assert got.rewards.tolist() == want and got.abstained == 0
    only = _task(tmp_path, ROWS, [{"function": f"{reward_file}:abstain_on_odd"}])
    problems = [q for q in only.train_support()[0] if q.columns["level"] == 1][:3]
    got = only.score(problems, ["x"] * 3)
    assert got.rewards.tolist() == [0.0] * 3 and got.abstained == 3  # all-None counts 0 and is counted


@pytest.mark.parametrize(
    ("name", "message"),
    [("raises", "raised KeyError"), ("too_few", "returned 1 values for 3 completions"), ("not_finite", "non-finite value")],
)
def test_a_failing_reward_function_is_named(tmp_path, reward_file, name, message):
    task = _task(tmp_path, ROWS, [{"function": f"{reward_file}:{name}"}])
    with pytest.raises(RewardError, match=f"reward function trl_rewards.py:{name} raised|{message}") as e:
        task.score(task.eval_problems(1) * 3, ["a", "b", "c"])
    assert f"trl_rewards.py:{name}" in str(e.value) and message in str(e.value) and e.value.index == 0


def test_weights_and_builtins(tmp_path):
    terms = build_terms(
        [{"name": "exact_match", "answer_column": "a", "weight": 2.0}, {"name": "numeric_match", "answer_column": "a"}]
    )
    got = compute_rewards(terms, {"completions": [" 7\n", "#### 7", "8"], "a": ["7", "7", "7"]}, 3)  # stripped
    assert got.rewards.tolist() == [3.0, 1.0, 0.0] and math.isclose(float(np.nanmean(got.per_function["exact_match"])), 1 / 3)


def test_the_held_out_split_is_seeded_and_disjoint(tmp_path, reward_file):
    a = _task(tmp_path, ROWS, [{"name": "exact_match", "answer_column": "solution"}], eval_fraction=0.25)
    b = _task(tmp_path, ROWS, [{"name": "exact_match", "answer_column": "solution"}], eval_fraction=0.25)
    held = [q.prompt for q in a.eval_problems(100)]
    assert held == [q.prompt for q in b.eval_problems(100)] and len(held) == 3
    assert not set(held) & {q.prompt for q in a.train_support()[0]}
    assert a.digest == b.digest and len(a.digest) == 16


def test_math_verify_compares_parsed_answers():
    from workers.rewards import math_verify

    assert math_verify(r"so the answer is $\boxed{\frac{1}{2}}$", "0.5") == 1.0
    assert math_verify(r"so the answer is $\boxed{\frac{1}{3}}$", "0.5") == 0.0


def test_a_reward_function_gets_trls_keyword_arguments(tmp_path):
    """prompts, completions, completion_ids, trainer_state (its global_step), log_metric, log_extra and every other
    column, as TRL passes them."""
    path = tmp_path / "spy.py"
    path.write_text(
        "import json\n\n"
        "def spy(prompts, completions, completion_ids, trainer_state, **columns):\n"
        f"    with open({str(tmp_path / 'seen.json')!r}, 'w') as f:\n"
        "        json.dump({'prompts': prompts, 'completions': completions, 'completion_ids': completion_ids,\n"
        "                   'step': trainer_state.global_step, 'columns': sorted(columns)}, f)\n"
        "    return [float(len(i)) for i in completion_ids]\n"
    )
    rows = [{"prompt": [{"role": "user", "content": "q"}], "solution": "4", "level": 1}] * 10
    task = _task(tmp_path, rows, [{"function": f"{path}:spy"}])
    state = TrainerState(global_step=3, max_steps=9)
    got = task.score(task.eval_problems(1) * 2, ["a", "bc"], completion_ids=[[5], [6, 7]], state=state)
    seen = json.loads((tmp_path / "seen.json").read_text())
    assert got.rewards.tolist() == [1.0, 2.0]
    assert seen["completions"] == [[{"role": "assistant", "content": "a"}], [{"role": "assistant", "content": "bc"}]]
    assert seen["prompts"] == [[{"role": "user", "content": "q"}]] * 2 and seen["completion_ids"] == [[5], [6, 7]]
    assert seen["step"] == 3 and seen["columns"] == ["level", "log_extra", "log_metric", "solution"]


def test_a_hub_name_is_not_fetched_and_the_message_says_how_to_get_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(DatasetError, match=r"no such file or folder; groupscale reads local files only, never a hub") as e:
        load_rows("openai/gsm8k")
    assert e.value.field == "path" and "hf download openai/gsm8k --repo-type dataset --local-dir DIR" in str(e.value)
    with pytest.raises(DatasetError, match=r"^.*no such file or folder$"):
        load_rows(tmp_path / "missing.parquet")


def test_a_data_file_is_read_by_its_exact_name_not_as_a_glob(tmp_path):
    """``x[v2].jsonl`` is that file (datasets reads data_files as a glob: unescaped, [v2] matched xv.jsonl)."""
    (tmp_path / "x[v2].jsonl").write_text(json.dumps({"prompt": "a", "answer": "1"}) + "\n")
    (tmp_path / "xv.jsonl").write_text(json.dumps({"prompt": "decoy", "answer": "2"}) + "\n")
    (tmp_path / "part1.jsonl").write_text(json.dumps({"prompt": "p1", "answer": "3"}) + "\n")
    assert load_rows(tmp_path / "x[v2].jsonl") == [{"prompt": "a", "answer": "1"}]
    (tmp_path / "part*.jsonl").write_text(json.dumps({"prompt": "star", "answer": "4"}) + "\n")
    assert load_rows(tmp_path / "part*.jsonl") == [{"prompt": "star", "answer": "4"}]  # one file, not every part


def test_a_file_rewritten_with_the_same_mtime_gives_its_new_rows(tmp_path):
    """datasets' cache is keyed by path and mtime: a file rewritten within the mtime's granularity (a second on
    some file systems) or copied with its mtime kept came back with its old rows."""
    path = tmp_path / "d.parquet"
    for i in range(3):
        Dataset.from_list([{"prompt": f"version {i}", "solution": str(i)}] * 2).to_parquet(str(path))
        os.utime(path, ns=(1_700_000_000_000_000_000,) * 2)  # the same mtime each time
        assert load_rows(path)[0]["prompt"] == f"version {i}"


def test_answer_columns_take_a_dotted_path_into_nested_columns(tmp_path):
    rows = [{"prompt": "q", "reward_model": {"style": "rule", "ground_truth": str(i)}} for i in range(10)]
    check_rows(rows, "prompt", ["reward_model.ground_truth"])
    with pytest.raises(
        DatasetError, match=r"no column 'reward_model.answer': no 'answer' in reward_model \(found: \['ground_truth', 'style'\]\)"
    ):
        check_rows(rows, "prompt", ["reward_model.answer"])
    task = _task(tmp_path, rows, [{"name": "exact_match", "answer_column": "reward_model.ground_truth"}])
    problems = task.train_support()[0][:2]
    assert [p.answer for p in problems] == [p.columns["reward_model"]["ground_truth"] for p in problems]
    got = task.score(problems, [problems[0].answer, "x"])
    assert got.rewards.tolist() == [1.0, 0.0]


def test_content_digest_reads_a_file_once_until_it_changes(tmp_path, monkeypatch):
    import builtins
    import hashlib

    from workers.data import content_digest

    data = tmp_path / "d.jsonl"
    data.write_bytes(b'{"prompt": "1+1", "answer": "2"}\n')
    folder = tmp_path / "f"
    (folder / "a").mkdir(parents=True)
    (folder / "a" / "x.bin").write_bytes(b"xyz")
    by_hand = hashlib.sha256(b"a/x.bin" + b"xyz").hexdigest()  # a folder: its files' relative names, then their bytes
    opened = []
    real_open = builtins.open
    monkeypatch.setattr(builtins, "open", lambda f, *a, **k: opened.append(str(f)) or real_open(f, *a, **k))
    first = content_digest(data)
    assert first == hashlib.sha256(data.read_bytes()).hexdigest() and content_digest(folder) == by_hand
    opened.clear()
    assert content_digest(data) == first and content_digest(folder) == by_hand and opened == []  # remembered
    data.write_bytes(b'{"prompt": "2+2", "answer": "4"}\n')
    os.utime(data, ns=(1, 2))  # another mtime as well as other bytes
    assert content_digest(data) == hashlib.sha256(data.read_bytes()).hexdigest() != first


# MATH-style answers, right and wrong (issue: the last-number reading scored \boxed{9} right for \frac{1}{9}).
MATH_CASES = [
    (r"so \boxed{\frac{1}{9}}", r"\frac{1}{9}", 1.0),
    (r"\boxed{9}", r"\frac{1}{9}", 0.0),
    ("The answer is 9", r"\frac{1}{9}", 0.0),
    (r"\boxed{\frac{2}{9}}", r"\frac{1}{9}", 0.0),
    (r"\boxed{\dfrac{1}{9}}", r"\frac{1}{9}", 1.0),
    ("#### 1/9", r"\frac{1}{9}", 1.0),
    (r"\boxed{0.6}", "3/5", 1.0),
    ("3 of 5 slices are eaten. #### 5", "3/5", 0.0),
    (r"\boxed{-\frac{3}{4}}", "-0.75", 1.0),
    (r"\boxed{\frac{7}{2}}", "3.5", 1.0),
    (r"\boxed{\sqrt{2}}", "2", 0.0),
    (r"\boxed{2\pi}", "2", 0.0),
    ("#### 2 or 3", "3", 0.0),
    ("#### 8 stamps", "8", 1.0),
    (r"\boxed{12\%}", "12", 1.0),
    (r"\boxed{x = 5}", "5", 1.0),
    ("#### 1,000", "1000", 1.0),
    (r"$\boxed{1/0}$", "0", 0.0),
]


@pytest.mark.parametrize(("completion", "answer", "score"), MATH_CASES)
def test_numeric_match_on_math_style_answers(completion, answer, score):
    assert numeric_match(completion, answer) == score


@pytest.mark.parametrize("answer", [r"\sqrt{2}", r"2\pi", r"(1, 2)", r"[0, \infty)", "x^2 + 1", "two"])
def test_numeric_match_refuses_a_reference_it_cannot_compare_without_showing_it(answer):
    with pytest.raises(ValueError, match="use math_verify for MATH-style answers") as e:
        numeric_match(r"\boxed{2}", answer)
    assert answer not in str(e.value)


def test_a_reference_numeric_match_cannot_read_scores_0_and_is_counted_in_the_step(caplog):
    """A MATH row's \\sqrt{2} past the rows the submit check read raised ValueError and killed the trial."""
    terms = build_terms([{"name": "numeric_match", "answer_column": "a"}])
    answers = [r"\sqrt{2}", "7", r"\boxed{2\pi}", "7"]
    with caplog.at_level("WARNING", logger="groupscale.rewards"):
        got = compute_rewards(terms, {"completions": [r"\boxed{2}", "#### 7", "0", "#### 8"], "a": answers}, 4)
    assert got.rewards.tolist() == [0.0, 1.0, 0.0, 0.0] and got.logged == {"numeric_match.unreadable_references": 2.0}
    assert "2 references in column 'a' are not a number" in caplog.text and "sqrt" not in caplog.text
    assert compute_rewards(terms, {"completions": ["7"], "a": ["7"]}, 1).logged == {}  # nothing met: nothing logged


def test_the_submit_check_reads_numeric_match_references_over_the_whole_file():
    """The first rows held numbers and a later one \\sqrt{2}: the check passed and the trial failed on it; now a sample
    spread over the file is read, and the refusal names the count and a row, not the data."""
    from workers.entry import check_answers_here

    rows = [{"prompt": f"q{i}", "answer": str(i), "data_source": "gsm8k"} for i in range(3000)]
    for i in range(2400, 2410):
        rows[i]["answer"] = r"\sqrt{2}"
    rewards = [{"name": "exact_match"}, {"name": "numeric_match", "weight": 0.5}]
    failure = check_answers_here(rewards, rows, "prompt")
    assert (
        failure["index"] == 1 and "and 3 of the 1000 references sampled over the file in 'answer' are not" in failure["message"]
    )
    assert re.search(r"\(the first: row 24\d\d\)", failure["message"]) and "sqrt" not in failure["message"]
    assert check_answers_here(rewards, rows[:2000], "prompt") is None
    assert check_answers_here([{"name": "exact_match"}], rows, "prompt") is None  # exact_match reads any text


def test_a_reference_answer_is_written_in_the_common_formats_and_one_must_score():
    from workers.rewards.reference import reference_answer, reference_failure

    assert [reference_answer(r) for r in ('["19", "19.0"]', {"ground_truth": "7"}, 42, None)] == ["19", "7", "42", None]
    assert reference_answer({"target": 24, "numbers": [3, 8]}) is None and reference_answer('{"target": 24}') is None
    rows = [{"prompt": "q", "a": '["19", "19.0"]'}, {"prompt": "q", "a": "#### 1,000"}]
    entries = [{"name": "exact_match", "answer_column": "a"}, {"name": "numeric_match", "answer_column": "a"}]
    assert reference_failure(build_terms(entries), entries, rows, "prompt") is None
    zero = WeightedReward("exact_match", "exact_match", 1.0, lambda completions, **kw: [0.0] * len(completions))
    failure = reference_failure([zero], entries[:1], rows, "prompt", positions=[3])
    assert failure.index == 3 and """it read 'a' (the first: '["19", "19.0"]') and scored""" in str(failure)


@pytest.mark.parametrize(
    ("answer", "accepted"),
    [
        ('["19", "19.0"]', ["19", "19.0"]),  # Skywork-OR1's ground_truth, a JSON list in a string
        (["19", "19.0"], ["19", "19.0"]),  # the same list, read by the data files as a list
        ('{"ground_truth": "42"}', ["42"]),  # prime's verification_info
        ({"ground_truth": ["7", "7.0"]}, ["7", "7.0"]),
        ("[0, 1]", ["[0, 1]"]),  # an interval is an answer itself
        ("[not json", ["[not json"]),
        ("19", ["19"]),
    ],
)
def test_a_reference_as_datasets_store_it_lists_the_answers_it_accepts(answer, accepted):
    from workers.rewards.builtin import accepted_answers

    assert accepted_answers(answer) == accepted


def test_a_skywork_row_scores_a_right_answer_1_and_a_wrong_one_0_with_every_builtin_scorer():
    """math_verify scored every right answer 0 against '["19"]' and the trial blamed the model."""
    from workers.rewards.builtin import exact_match, math_verify, math_verify_available, numeric_match

    truth = '["19", "19.0"]'
    assert (exact_match("19", truth), exact_match("19.0", truth), exact_match("20", truth)) == (1.0, 1.0, 0.0)
    assert (numeric_match("so x = \\boxed{19}", truth), numeric_match("#### 21", truth)) == (1.0, 0.0)
    if math_verify_available():
        assert (math_verify("The answer is $\\boxed{19}$", truth), math_verify("$\\boxed{20}$", truth)) == (1.0, 0.0)

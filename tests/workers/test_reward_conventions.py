"""Every trainer's reward convention, told apart by signature (convention: auto), on files of their repositories'
shapes (tests/fixtures/user_material/rewards/conventions/), and reward servers over real HTTP
(tests/reward_server.py, a process): scores, and each way a server fails."""

import pytest

from tests.ports import free_port
from tests.reward_server import running
from tests.user_material import REWARDS
from workers.rewards import RewardError, TrainerState, trl_kwargs
from workers.rewards.conventions import CONVENTIONS
from workers.rewards.loading import answer_paths, build_terms, load_function
from workers.rewards.process import RewardProcess
from workers.rewards.terms import compute_rewards

HERE = REWARDS / "conventions"
PROMPTS = ["Add 3 and 4.", "Add 1 and 7.", "Add 2 and 2."]
TEXTS = ["<think>3+4</think> so \\boxed{7}", "\\boxed{9}", "<think>x</think> 4"]


def _kwargs(answers, column="answer", prompts=PROMPTS, texts=TEXTS):
    rows = [{column: a} for a in answers]
    return trl_kwargs(prompts, texts, [[1] * (i + 1) for i in range(len(texts))], rows, False, TrainerState(0, 4))


def _score(entries, kwargs):
    return compute_rewards(build_terms(entries), kwargs, len(kwargs["completions"]))


@pytest.mark.parametrize(
    "ref, convention",
    [
        ("openrlhf_reward.py:reward_func", "openrlhf"),
        ("easyr1_math.py:compute_score", "easyr1"),
        ("easyr1_sequential.py:compute_score", "easyr1"),
        ("verifiers_env.py:load_environment", "verifiers"),
        ("verifiers_func.py:correct_answer_reward_func", "verifiers"),
        (f"{REWARDS / 'plain' / 'siblings.py'}:format_reward", "trl"),
    ],
)
def test_auto_tells_the_conventions_apart_by_signature(ref, convention):
    from workers.rewards.conventions import detect

    file, _, name = ref.rpartition(":")
    fn = load_function(f"{HERE / file if '/' not in file else file}:{name}")
    assert detect(fn, ref).name == convention


def test_a_function_of_no_convention_is_refused_naming_them_and_its_signature():
    with pytest.raises(RewardError) as e:
        build_terms([{"function": f"{HERE / 'verifiers_func.py'}:fits_nothing"}])
    assert "fits_nothing(text, reference)" in str(e.value)
    assert all(f"{name}: " in str(e.value) for name in CONVENTIONS) and e.value.index == 0


def test_openrlhf_reward_funcs_get_queries_prompts_and_labels_and_their_extra_logs_are_logged():
    got = _score(
        [
            {"function": f"{HERE / 'openrlhf_reward.py'}:reward_func", "answer_column": "solution"},
            {"function": f"{HERE / 'openrlhf_math.py'}:reward_func", "answer_column": "solution"},
        ],
        _kwargs(["7", "8", "4"], column="solution"),
    )
    assert got.per_function["openrlhf_reward.reward_func"].tolist() == [1.0, 0.0, 1.0]  # label in the response
    assert got.per_function["openrlhf_math.reward_func"].tolist() == [1.0, 0.0, 0.0]  # the boxed answer graded
    assert got.logged["math_accuracy"] == pytest.approx(1 / 3) and got.logged["dummy_scores"] == pytest.approx(2 / 3)
    assert answer_paths([{"function": "r.py:reward_func", "convention": "openrlhf"}]) == ["label"]


def test_easyr1_scores_are_their_overall_and_each_part_is_logged():
    got = _score(
        [{"function": f"{HERE / 'easyr1_math.py'}:compute_score", "kwargs": {"format_weight": 0.5}}], _kwargs(["7", "8", "4"])
    )
    assert got.rewards.tolist() == [1.0, 0.0, 0.0]  # accuracy and format both, once: (1 - 0.5) * 1 + 0.5 * 1
    assert got.logged == {"format": pytest.approx(1 / 3), "accuracy": pytest.approx(1 / 3)}
    seq = _score([{"function": f"{HERE / 'easyr1_sequential.py'}:compute_score", "kwargs": {"bonus": 0.5}}], _kwargs(["7"] * 3))
    assert seq.rewards.tolist() == [1.5, 2.5, 3.5] and seq.logged["length"] == 2.0  # response_length: completion tokens


def test_a_verifiers_environment_is_its_rubrics_weighted_sum_with_its_parser():
    got = _score(
        [{"function": f"{HERE / 'verifiers_env.py'}:load_environment", "kwargs": {"scale": 2.0}}], _kwargs(["7", "8", "4"])
    )
    assert got.rewards.tolist() == [2.0, 0.0, 0.0]  # correct_answer x 2; the length metric has weight 0
    assert got.logged["correct_answer"] == pytest.approx(1 / 3)
    assert got.logged["length_metric"] == pytest.approx(sum(map(len, TEXTS)) / 3)  # state["completion"] given
    assert got.logged["num_turns"] == 1.0  # a metric of the rollout's state: its trajectory of one turn
    lifted = _score([{"function": f"{HERE / 'verifiers_func.py'}:correct_answer_reward_func"}], _kwargs(["7}", "8", "4"]))
    assert lifted.rewards.tolist() == [1.0, 0.0, 1.0]


def test_a_rubric_function_that_asks_for_verifiers_parser_needs_verifiers():
    try:
        import verifiers  # noqa: F401
    except ImportError:
        with pytest.raises(RewardError, match=r"pip install 'groupscale\[verifiers\]'"):
            build_terms([{"function": f"{HERE / 'verifiers_func.py'}:with_parser"}])
    else:
        pytest.skip("verifiers is installed here")


def test_a_named_convention_is_used_as_named_and_solution_str_is_verls_alone():
    fn = f"{HERE / 'verifiers_func.py'}:correct_answer_reward_func"
    with pytest.raises(RewardError, match="solution_str belongs to verl's convention"):
        build_terms([{"function": fn, "solution_str": "prompt_and_response"}])
    with pytest.raises(RewardError, match="answer_column is not read by .* a TRL-convention function"):
        build_terms([{"function": f"{REWARDS / 'plain' / 'siblings.py'}:format_reward", "answer_column": "a"}])


# reward servers: a real server process


@pytest.fixture(autouse=True)
def _quick_backoff(monkeypatch):
    monkeypatch.setattr("workers.rewards.http.BACKOFF_S", 0.01)  # the retries, not their waiting, are under test


@pytest.fixture(scope="module")
def server():
    with running(free_port()) as base:
        yield base


def _server(base, path, **entry):
    return {"url": f"{base}/{path}", **entry}


def test_a_reward_servers_scores_reach_the_batch_in_both_request_shapes(server):
    got = _score(
        [
            _server(server, "json", batch_size=2, convention="http"),  # DESIGN.md's name for it; auto takes a url alike
            _server(server, "openrlhf", request="openrlhf", answer_column="answer"),
        ],
        _kwargs(["7", "8", "4"]),
    )
    keys = list(got.per_function)
    assert got.per_function[keys[0]].tolist() == [1.0, 0.0, 1.0]  # two requests of 2 and 1 completions
    assert got.per_function[keys[1]].tolist() == [1.0, 0.0, 1.0] and got.logged["server_mean"] == pytest.approx(2 / 3)
    assert keys[0].startswith("http.127.0.0.1_")
    import httpx

    assert httpx.get(f"{server}/hits").json()["json"] >= 2


@pytest.mark.parametrize(
    "path, entry, cause, requests",
    [
        ("status/500", {"retries": 2}, "HTTP 500: the server failed", 3),
        ("slow", {"retries": 1, "timeout_s": 0.5}, "no answer within 0.5 s", 2),
        ("short", {"retries": 0}, "the reply has 2 scores for 3 completions", 1),
        ("nan", {"retries": 0}, "not a finite number", 1),
        ("status/422", {"retries": 3}, "HTTP 422", 1),  # the request is wrong: not tried again
    ],
)
def test_a_failing_reward_server_fails_the_batch_naming_the_url_after_the_retries(server, path, entry, cause, requests):
    import httpx

    before = httpx.get(f"{server}/hits").json().get(path, 0)
    with pytest.raises(RewardError) as e:
        _score([{"name": "exact_match"}, _server(server, path, **entry)], _kwargs(["7", "8", "4"]))
    assert f"the reward server {server}/{path} failed after {requests} request" in str(e.value) and cause in str(e.value)
    assert e.value.index == 1 and httpx.get(f"{server}/hits").json()[path] - before == requests


def test_a_server_that_recovers_within_the_retries_gives_its_scores(server):
    got = _score([_server(server, "flaky/2", retries=2)], _kwargs(["7", "8", "4"]))
    assert got.rewards.tolist() == [1.0, 0.0, 1.0]


def test_a_server_that_is_down_fails_the_check_at_submit():
    url = f"http://127.0.0.1:{free_port()}/reward"
    process = RewardProcess([{"url": url, "retries": 0}])
    try:
        failure = process.check(_kwargs(["7", "8", "4"]), 3)
    finally:
        process.close()
    assert failure is not None and failure.index == 0 and f"the reward server {url} failed after 1 request" in str(failure)


def test_a_trials_params_say_how_each_reward_is_called(tmp_path, server):
    import json

    from workers.tasks import make_task

    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps({"prompt": PROMPTS[i % 3], "answer": "7"}) + "\n" for i in range(10)))
    rewards = [
        {"name": "exact_match"},
        {"function": f"{HERE / 'openrlhf_reward.py'}:reward_func", "answer_column": "answer"},
        {"url": f"{server}/json"},
    ]
    task = make_task({"name": "dataset", "path": str(data), "rewards": rewards})
    try:
        assert task.reward_params == {
            "task.rewards.0.convention": "builtin",
            "task.rewards.1.convention": "openrlhf",
            "task.rewards.2.convention": "http",
        }
    finally:
        task.close()

"""Real GRPO trials on chat-tiny with users' material: every shape of reward file, a verl parquet, a model folder
that ships sampling fields and a template variable, a data file with glob characters in its name.

Each trial runs in a thread, as on a warm Ray worker (workers.worker.TrialWorker), so math_verify's signal-based
timeouts are exercised where they used to fail; tests/e2e/test_user_material.py runs them on Ray with MLflow.
"""

import json
import shutil
import threading

import pytest

from sweeps.trial import TrialConfig, TrialResult
from tests.user_material import REWARDS, verl_rows, word_problem_rows, write_parquet
from workers.engines.groupscale import train_trial
from workers.models.presets import preset_path

pytestmark = pytest.mark.slow  # two chat-tiny trials; tests/e2e/test_user_material.py runs the same on Ray (also slow)
PLAIN = REWARDS / "plain"
THINKING = "{% if enable_thinking is defined and not enable_thinking %}<think>\n\n</think>\n\n{% endif %}"
STEPS = 3


class Recorder:
    """A trial's report as MLflow's RunLogger offers it: metrics per step, the samples table and tags."""

    def __init__(self) -> None:
        self.steps: dict[int, dict[str, float]] = {}
        self.table: list[dict] = []
        self.tags: dict[str, str] = {}

    def __call__(self, metrics: dict[str, float], step: int) -> None:
        self.steps.setdefault(step, {}).update(metrics)

    def log_table(self, rows: list[dict]) -> None:
        self.table = rows

    def set_tags(self, tags: dict[str, str]) -> None:
        self.tags |= tags

    def flush(self) -> None:
        pass


def _in_a_thread(cfg: TrialConfig, report: Recorder) -> TrialResult:
    out: list = []
    thread = threading.Thread(target=lambda: out.append(train_trial(cfg, report)))
    thread.start()
    thread.join()
    return out[0]


@pytest.fixture(scope="module")
def chat_folder(model_cache, tmp_path_factory):
    """chat-tiny as a user's folder: its generation_config ships repetition_penalty and top_k (as Qwen2.5-Instruct
    ships sampling fields) and its template reads ``enable_thinking`` (as Qwen3's)."""
    folder = tmp_path_factory.mktemp("model") / "chat-tiny"
    shutil.copytree(preset_path("chat-tiny", None, model_cache), folder)
    config = json.loads((folder / "generation_config.json").read_text())
    (folder / "generation_config.json").write_text(json.dumps({**config, "repetition_penalty": 2.0, "top_k": 3}))
    template = folder / "chat_template.jinja"
    template.write_text(template.read_text() + THINKING)
    return folder


def _config(task: dict, model: dict, tmp_path) -> TrialConfig:
    return TrialConfig.flat(
        task=task,
        model=model,
        group_size=2,
        samples_per_step=8,
        seed=0,
        steps=STEPS,
        lr=3e-4,
        max_new_tokens=24,
        eval_prompts=6,
        eval_samples_per_prompt=2,
        cache_dir=str(tmp_path),
    )


def test_a_trial_runs_every_shape_of_trl_and_open_r1_reward_file(chat_folder, tmp_path):
    data = tmp_path / "x[v2].jsonl"  # glob characters: read as that file, not as a pattern
    rows = word_problem_rows(40)
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "xv.jsonl").write_text(json.dumps({"question": "a decoy without the columns"}) + "\n")
    rewards = [
        {"function": f"{REWARDS / 'mathpkg/rewards/accuracy.py'}:accuracy_reward"},
        {"function": f"{PLAIN / 'siblings.py'}:format_reward"},
        {"function": f"{PLAIN / 'uses_trl.py'}:think_format_reward", "weight": 0.1},
        {"function": f"{PLAIN / 'factories.py'}:get_length_penalty", "kwargs": {"max_len": 24, "penalty": -0.1}},
        {"function": f"{PLAIN / 'async_rewards.py'}:graded_remotely"},
        {"function": f"{PLAIN / 'logging_rewards.py'}:logged_length"},
        {"function": f"{PLAIN / 'math_direct.py'}:verified"},
        {"function": f"{PLAIN / 'my+rewards(v2).py'}:constant"},
        {"name": "math_verify", "answer_column": "solution"},
    ]
    task = {"name": "dataset", "path": str(data), "rewards": rewards}
    model = {"path": str(chat_folder), "chat_template_kwargs": {"enable_thinking": False}}
    report = Recorder()
    result = _in_a_thread(_config(task, model, tmp_path), report)
    assert result.status == "succeeded", result.reason
    keys = [
        "accuracy.accuracy_reward",
        "siblings.format_reward",
        "uses_trl.think_format_reward",
        "factories.get_length_penalty",
        "async_rewards.graded_remotely",
        "logging_rewards.logged_length",
        "math_direct.verified",
        "my_rewards_v2_.constant",
        "math_verify",
    ]
    for step in range(1, STEPS + 1):
        metrics = report.steps[step]
        assert all(f"reward/{k}" in metrics for k in keys), sorted(metrics)
        assert metrics["reward/my_rewards_v2_.constant"] == 0.25 and -0.1 <= metrics["reward/factories.get_length_penalty"] < 0
        assert metrics["reward_log/progress"] == pytest.approx((step - 1) / STEPS)  # trainer_state: steps done, of T
        assert metrics["reward_log/mean_chars"] > 0
    # math_verify's parse/verify ran with their default timeouts, called directly and as the built-in
    steps = range(1, STEPS + 1)
    direct = [report.steps[s]["reward/math_direct.verified"] for s in steps]
    assert direct == [report.steps[s]["reward/math_verify"] for s in steps] and all(0 <= v <= 1 for v in direct)
    assert max(report.steps[s]["reward/accuracy.accuracy_reward"] for s in steps) > 0  # the warm start solves some
    # log_extra is a column of the samples table; the rendered prompts carry the template variable
    assert report.table and all(row["chars"] == len(row["completion"]) for row in report.table)
    assert all(row["prompt"].endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n") for row in report.table)
    # the folder's sampling fields are not applied, and the run says which were ignored
    assert report.tags == {"groupscale.generation_config_ignored": "repetition_penalty=2.0, top_k=3"}


def test_a_trial_on_a_verl_parquet_with_a_verl_scorer(chat_folder, tmp_path):
    data = write_parquet(verl_rows(40), tmp_path / "train.parquet")
    rewards = [
        {"function": f"{PLAIN / 'verl_score.py'}:compute_score", "convention": "verl"},
        {"function": f"{PLAIN / 'verl_score.py'}:gsm8k_score", "convention": "verl", "kwargs": {"method": "flexible"}},
        {"name": "numeric_match", "answer_column": "reward_model.ground_truth"},
    ]
    report = Recorder()
    cfg = _config({"name": "dataset", "path": str(data), "rewards": rewards}, {"path": str(chat_folder)}, tmp_path)
    result = _in_a_thread(cfg, report)
    assert result.status == "succeeded", result.reason
    strict = [report.steps[s]["reward/verl_score.compute_score"] for s in range(1, STEPS + 1)]
    builtin = [report.steps[s]["reward/numeric_match"] for s in range(1, STEPS + 1)]
    assert strict == builtin and max(strict) > 0  # verl's strict "#### N" match is numeric_match on these answers
    assert all(row["source"] == "openai/gsm8k" and isinstance(row["row"], int) for row in report.table)

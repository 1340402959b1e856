"""task.prompt_format and task.prompt_template: the token ids the policy reads for a string prompt (chat-tiny: through
its chat template under auto, as the string under raw), the data's own prompt for the rewards, a model without a chat
template, and the two kinds of template file."""

import json
import re
import shutil

import pytest

from sweeps.prompt_template import load_prompt_template
from sweeps.trial import TrialConfig
from workers.batch import sample_batch, setup
from workers.engines.trl import _dataset
from workers.models.presets import preset_path
from workers.tasks import make_task
from workers.tasks.dataset import resolve_prompt_format

# 1 when every prompt a reward function receives is a string (the data's own prompt), else 0
REWARD = "def is_string(completions, prompts, **kwargs):\n    return [float(isinstance(p, str)) for p in prompts]\n"


@pytest.fixture
def data(tmp_path):
    path = tmp_path / "data.jsonl"
    path.write_text("".join(json.dumps({"prompt": f"What is {i} plus 1?", "answer": str(i + 1)}) + "\n" for i in range(10)))
    (tmp_path / "rewards.py").write_text(REWARD)
    return path


def _task(data, **options) -> dict:
    return {"name": "dataset", "path": str(data), "rewards": [{"function": f"{data.parent / 'rewards.py'}:is_string"}], **options}


def _config(data, model, **options) -> TrialConfig:
    return TrialConfig.flat(
        task=_task(data, **options), model=model, group_size=2, samples_per_step=4, seed=0, steps=1, max_new_tokens=4,
        cache_dir=str(data.parent),
    )  # fmt: skip


def _first_prompt_ids(cfg: TrialConfig) -> tuple[list[int], str, object, list[list[float]]]:
    """The token ids the policy sampled the batch's first group from, that group's prompt as the data stores it, the
    tokenizer and the batch's rewards."""
    task, policy, rng = setup(cfg)
    try:
        batch = sample_batch(policy, task, cfg, rng)
    finally:
        task.close()
    ro, p = batch.rollout, batch.rollout.prompt_len
    ids = ro.input_ids[0, :p][ro.attention_mask[0, :p] == 1].tolist()
    return ids, batch.problems[0].stored_prompt, policy.tokenizer, batch.rewards.tolist()


@pytest.fixture(scope="module")
def chat_tiny(model_cache):
    return str(preset_path("chat-tiny", None, model_cache))


@pytest.mark.parametrize("prompt_format", ["auto", "raw"])
def test_a_string_prompt_reaches_chat_tiny_templated_under_auto_and_as_it_is_under_raw(data, chat_tiny, prompt_format):
    ids, prompt, tokenizer, rewards = _first_prompt_ids(_config(data, {"path": chat_tiny}, prompt_format=prompt_format))
    assert isinstance(prompt, str) and prompt.startswith("What is")
    bos = [tokenizer.bos_token_id]  # chat-tiny's tokenizer adds a BOS, which its template does not write: once in front
    templated = (
        bos + tokenizer.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True)["input_ids"]
    )
    as_string = tokenizer(prompt)["input_ids"]
    assert templated != as_string
    assert ids == (templated if prompt_format == "auto" else as_string)
    assert rewards == [[1.0, 1.0], [1.0, 1.0]]  # the reward function got the string prompts, either way


def test_a_model_without_a_chat_template_keeps_raw_under_auto_and_refuses_chat(data, chat_tiny, tmp_path):
    folder = tmp_path / "no-template"
    shutil.copytree(chat_tiny, folder)
    (folder / "chat_template.jinja").unlink()
    config = json.loads((folder / "tokenizer_config.json").read_text())
    (folder / "tokenizer_config.json").write_text(json.dumps({k: v for k, v in config.items() if k != "chat_template"}))
    ids, prompt, tokenizer, _ = _first_prompt_ids(_config(data, {"path": str(folder)}))
    assert ids == tokenizer(prompt)["input_ids"]
    with pytest.raises(ValueError, match="task.prompt_format chat: the model has no chat template"):
        setup(_config(data, {"path": str(folder)}, prompt_format="chat"))


def test_auto_is_chat_exactly_where_the_model_renders_a_template():
    assert [resolve_prompt_format(f, True) for f in ("auto", "chat", "raw")] == ["chat", "chat", "raw"]
    assert [resolve_prompt_format(f, False) for f in ("auto", "raw")] == ["raw", "raw"]
    with pytest.raises(ValueError, match="allowed: auto, chat, raw"):
        resolve_prompt_format("messages", True)


@pytest.mark.parametrize(
    ("name", "text", "read"),
    [
        ("math.jinja", "{{ content | trim }} You FIRST think.", "What is 0 plus 1? You FIRST think."),
        ("cot.txt", "Think step-by-step.\n\n{}\n", "Think step-by-step.\n\nWhat is 0 plus 1?\n"),
        ("braces.txt", "Answer in {{}}: {}", "Answer in {}: What is 0 plus 1?"),
    ],
)
def test_a_template_file_formats_the_content_the_model_reads_and_rewards_keep_the_data(data, name, text, read):
    (data.parent / name).write_text(text)
    task = make_task(_task(data, prompt_template=str(data.parent / name)))
    try:
        for templated, expected in ((True, [{"role": "user", "content": read}]), (False, read)):
            problem = next(q for q in task.read_by(templated).train_support()[0] if q.stored_prompt == "What is 0 plus 1?")
            assert problem.prompt == expected
        chat = task.read_by(True)
        rows, problems = _dataset(chat)[0], chat.train_support()[0]
        assert rows[0]["prompt"] == problems[0].prompt and isinstance(rows[0]["prompt"], list)  # TRL templates it
        assert chat.score(problems[:2], ["a", "b"]).rewards.tolist() == [1.0, 1.0]  # the rewards: the data's strings
        assert chat.prompt_params == {"task.prompt_format": "chat", "task.prompt_template": str(data.parent / name)}
    finally:
        task.close()


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("none.txt", "Think step by step.", "has no {}; allowed: exactly one {}"),
        ("two.txt", "{} and {}", "has {}, {}; allowed: exactly one {}"),
        ("named.txt", "Problem: {problem}", "has {problem}; allowed"),
        ("brace.txt", "a { b {}", "write a literal brace as {{ or }}"),
        ("nocontent.jinja", "{{ question }} Think.", "never uses {{ content }}"),
        ("other.jinja", "{{ content }} {{ hint }}", "uses hint; allowed: the variable content alone"),
        ("broken.jinja", "{{ content ", "does not parse"),
    ],
)
def test_a_template_that_cannot_format_a_prompt_says_what_is_allowed(tmp_path, name, text, message):
    (tmp_path / name).write_text(text)
    with pytest.raises(ValueError, match=re.escape(message)):
        load_prompt_template(tmp_path / name)

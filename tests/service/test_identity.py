"""A dataset task keeps the task_key it was filed under when settings are added to the spec (service.identity)."""

import json

from service.identity import short_digest, task_key
from sweeps.spec import SweepSpec
from workers.data import content_digest

# A dataset task's options as the spec of 90affe1 dumped them (before prompt_format, convention auto and reward
# servers): the key stored sweeps hold was made of these.
BEFORE = {
    "split": None,
    "prompt_column": "prompt",
    "eval_fraction": None,
    "max_reward": 1.0,
    "rewards": [
        {"function": None, "name": "exact_match", "answer_column": None, "kwargs": None, "convention": "trl",
         "solution_str": "response", "weight": 1.0},
    ],
}  # fmt: skip


def _key(tmp_path, **task):
    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"q{i}", "answer": str(i)}) + "\n" for i in range(4)))
    spec = {"name": "n", "group_sizes": [2], "samples_per_step": [8], "model": {"preset": "chat-tiny"}}
    task = {"name": "dataset", "path": str(data), "rewards": [{"name": "exact_match"}], **task}
    return task_key(SweepSpec.model_validate({**spec, "task": task})), content_digest(data)


def test_a_task_with_the_settings_of_before_keeps_its_key(tmp_path):
    key, digest = _key(tmp_path, prompt_format="raw")
    assert key == f"dataset:{short_digest(digest + json.dumps(BEFORE, sort_keys=True))}"
    assert _key(tmp_path, prompt_format="auto")[0] != key  # another rendering of string prompts: another task
    served = _key(tmp_path, prompt_format="raw", rewards=[{"url": "http://127.0.0.1:1/r"}])[0]
    assert served not in (key, _key(tmp_path, prompt_format="raw", rewards=[{"url": "http://127.0.0.1:2/r"}])[0])

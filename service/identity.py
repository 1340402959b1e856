"""What recommendations, MLflow experiments and listings file a sweep under, and which answers speak for its grid.

A built-in task is keyed by its name (with a digest of its options when they differ from the
defaults); a data task by its content digest (the bytes of its files and the settings that change
the task: columns, split, rewards), after the user's ``label`` when given; a preset by its name; a
model folder by its resolved path and the digest of its config.json. So ``recommend`` never answers
for one dataset or model with another one's sweep. ``question`` tells whether a cheap answer asked the question a
sweep's grid measures (its training settings too), so that a fit never cites another spec's answer.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from sweeps.spec import SweepSpec
from sweeps.spec.task import server_defaults
from workers.entry import content_digest

DIGEST_CHARS = 16


def short_digest(data: str | bytes) -> str:
    """The first DIGEST_CHARS hex digits of the sha256 of ``data`` (a str is UTF-8 encoded)."""
    return hashlib.sha256(data if isinstance(data, bytes) else data.encode()).hexdigest()[:DIGEST_CHARS]


def task_key(spec: SweepSpec) -> str:
    """``arithmetic``, ``jsonl:<digest>``, ``dataset:<digest>`` or ``<label>:<digest>`` (at most 57 characters).

    Raises:
        OSError: a data file cannot be read (preflight has checked it first).
    """
    task = spec.task
    options = as_before(task.model_dump(exclude={"name", "path", "eval_path", "label"}, mode="json"))
    if task.data_files:
        digest = short_digest(content_digest(*task.data_files) + json.dumps(options, sort_keys=True))
        return f"{task.label or task.name}:{digest}"
    defaults = type(task).model_validate({"name": task.name}).model_dump(exclude={"name"}, mode="json")
    return task.name if options == defaults else f"{task.name}:{short_digest(json.dumps(options, sort_keys=True))}"


# Settings added after keys were first filed, at the values that mean what a spec without them meant: left out of the
# key, so that a task keeps the key it had (stored sweeps hold their keys, and recommend matches new specs to them).
BEFORE_TASK = {"prompt_format": "raw", "prompt_template": None}
BEFORE_REWARD = {"url": None, **server_defaults()}


def as_before(options: dict) -> dict:
    """A task's options as keys were filed before the settings of BEFORE_TASK and BEFORE_REWARD existed: each at its
    old meaning left out, and a reward's ``convention: auto`` as the ``trl`` that every entry then held (auto calls a
    TRL function as TRL does; a function of another trainer's convention could not be run then)."""
    out = {k: v for k, v in options.items() if not (k in BEFORE_TASK and v == BEFORE_TASK[k])}
    if "prompt_format" in out and out.get("prompt_template") is None:
        out.pop("prompt_template", None)
    if isinstance(out.get("rewards"), list):
        kept = [{k: v for k, v in r.items() if not (k in BEFORE_REWARD and v == BEFORE_REWARD[k])} for r in out["rewards"]]
        out["rewards"] = [r | ({"convention": "trl"} if r.get("convention") == "auto" else {}) for r in kept]
    return out


def model_key(spec: SweepSpec) -> str:
    """The preset's name, or ``<resolved folder>@<digest of config.json>``."""
    if spec.model.preset is not None:
        return spec.model.preset
    folder = Path(spec.model.path).expanduser().resolve()
    return f"{folder}@{short_digest((folder / 'config.json').read_bytes())}"


# What a grid measures beside its task and model: an answer asked with other values of these answers another question.
QUESTION_FIELDS = frozenset(
    {"samples_per_step", "tokens_per_step", "group_sizes", "steps", "grpo", "eval", "measure", "engine", "trl"}
)


def question(spec: SweepSpec) -> dict:
    """The training a spec asks "which G" of (QUESTION_FIELDS), beside its task_key and model_key: a cheap answer
    whose spec has the same keys and question speaks for the other's grid. Names, seeds, resources and the probe's
    and answer's own settings may differ. Reads no file (the keys do)."""
    return spec.model_dump(mode="json", include=set(QUESTION_FIELDS))

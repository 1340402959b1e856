"""Users' datasets: local files and folders read with Hugging Face ``datasets``, never from a hub.

Formats, by the path: ``.jsonl`` / ``.json``, ``.parquet``, ``.csv``, ``.arrow``, or a folder
written by ``save_to_disk`` (a ``Dataset``, or a ``DatasetDict`` with ``split``). Rows are the
plain dicts ``datasets`` gives. The prompt column holds a string (TRL's standard format) or a list
of ``{role, content}`` messages (TRL's conversational format); every other column travels with its
row to the reward functions. Torch-free, so the controller can check a dataset before scheduling.
"""

from __future__ import annotations

import functools
import glob
import hashlib
import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_DATASETS_OFFLINE", "1")  # a local path never falls through to the hub
os.environ.setdefault("HF_HUB_OFFLINE", "1")

BUILDERS = {".jsonl": "json", ".json": "json", ".parquet": "parquet", ".csv": "csv", ".arrow": "arrow"}
FORMATS = "a .jsonl, .json, .parquet, .csv or .arrow file, or a save_to_disk folder"


class DatasetError(ValueError):
    """A dataset that cannot be used; ``field`` is the spec field to blame (path, split, prompt_column...)."""

    def __init__(self, field: str, msg: str) -> None:
        super().__init__(msg)
        self.field = field


def load_rows(path: str | Path, split: str | None = None) -> list[dict[str, Any]]:
    """All rows of a local dataset file or ``save_to_disk`` folder, as dicts.

    Raises:
        DatasetError: not a supported format, unreadable, a DatasetDict without a valid ``split``, or
            no rows. The message names what was found, never the file's content.
    """
    given, path = str(path), Path(path).expanduser()
    if not path.exists():  # before importing datasets: a wrong path is the commonest mistake
        hub = (
            ""
            if path.is_absolute() or path.suffix
            else (
                f"; groupscale reads local files only, never a hub: download it first "
                f"(hf download {given} --repo-type dataset --local-dir DIR) and give DIR"
            )
        )
        raise DatasetError("path", "no such file or folder" + hub)
    import datasets

    datasets.disable_progress_bars()
    try:
        if path.is_dir():
            loaded = datasets.load_from_disk(str(path))
            if isinstance(loaded, datasets.DatasetDict):
                names = sorted(loaded)
                if split is None or split not in loaded:
                    raise DatasetError("split", f"the folder holds splits {names}; set split to one of them")
                loaded = loaded[split]
            rows = loaded.to_list()
        elif path.suffix.lower() in BUILDERS:
            # data_files is a glob pattern: escaped, so ``x[v2].jsonl`` is that file, not ``xv.jsonl``. A cache of
            # its own per read: datasets' cache is keyed by path and mtime, so a file rewritten within a second
            # would come back with its old rows while content_digest says they are new.
            with tempfile.TemporaryDirectory(prefix="groupscale-data-") as cache:
                builder = BUILDERS[path.suffix.lower()]
                loaded = datasets.load_dataset(builder, data_files=glob.escape(str(path)), split="train", cache_dir=cache)
                rows = loaded.to_list()
        else:
            raise DatasetError("path", f"unsupported file type {path.suffix or '(none)'!r}; allowed: {FORMATS}")
    except DatasetError:
        raise
    except Exception as e:  # noqa: BLE001 - datasets/pyarrow raise many types; the first line of the type is enough
        raise DatasetError("path", f"cannot be read as {FORMATS} ({type(e).__name__})") from None
    if not rows:
        raise DatasetError("path", "the dataset has no rows")
    return rows


def lookup(row: dict[str, Any], path: str) -> Any:
    """The value at ``path`` in a row: the column of that name, else a dotted path into nested columns
    (``reward_model.ground_truth``, verl's layout).

    Raises:
        KeyError: the path leads nowhere; the message names the part missing and the keys found there.
    """
    if path in row:
        return row[path]
    value: Any = row
    for depth, part in enumerate(path.split(".")):
        if not isinstance(value, dict) or part not in value:
            where = ".".join(path.split(".")[:depth]) or "the row"
            keys = sorted(value) if isinstance(value, dict) else f"a {type(value).__name__}, not a mapping"
            raise KeyError(f"no {part!r} in {where} (found: {keys})")
        value = value[part]
    return value


def check_rows(rows: list[dict[str, Any]], prompt_column: str, columns: Iterable[str] = ()) -> None:
    """Every row has the prompt column as a string or a list of {role, content} messages, and every
    column in ``columns`` (the answer columns of built-in rewards, verl's ground truth; a dotted path
    reaches into a nested column).

    Raises:
        DatasetError: naming the missing column and the columns found, or the first bad row.
    """
    found = sorted(rows[0])
    if prompt_column not in rows[0]:
        raise DatasetError("prompt_column", f"the dataset has no column {prompt_column!r}; its columns: {found}")
    for name in columns:
        try:
            lookup(rows[0], name)
        except KeyError as e:
            raise DatasetError("rewards", f"the dataset has no column {name!r}: {e.args[0]}; its columns: {found}") from None
    for i, row in enumerate(rows):
        prompt = row.get(prompt_column)
        if isinstance(prompt, str):
            continue
        if not isinstance(prompt, list) or not prompt or not all(_is_message(m) for m in prompt):
            raise DatasetError(
                "prompt_column",
                f"row {i}: column {prompt_column!r} must hold a string or a non-empty "
                "list of {role, content} messages (TRL's conversational format), "
                f"found {type(prompt).__name__}",
            )


def _is_message(m: Any) -> bool:
    return isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)


def is_conversational(prompt: Any) -> bool:
    """TRL's test: a prompt given as a list of messages."""
    return isinstance(prompt, list)


def content_digest(*paths: str | Path) -> str:
    """sha256 over the bytes of the files (a folder: every file below it, by relative name), 64 hex digits.

    Remembered by each file's (path, size, mtime in ns), so a controller that keys many requests by the same
    data files (recommendations, fits beside answers) reads them once, not once a request.

    Raises:
        OSError: a file cannot be read.
    """
    listed = []
    for p in paths:
        p = Path(p).expanduser()
        files = sorted(f for f in p.rglob("*") if f.is_file()) if p.is_dir() else [p]
        for f in files:
            st = f.stat()  # a folder's layout is part of its content; a single file's name is not
            listed.append((str(f), str(f.relative_to(p)) if p.is_dir() else None, st.st_size, st.st_mtime_ns))
    return _digest_of(tuple(listed))


@functools.lru_cache(maxsize=256)
def _digest_of(listed: tuple[tuple[str, str | None, int, int], ...]) -> str:
    """content_digest of the listed (file, relative name or None, size, mtime_ns): the bytes, read once per listing."""
    h = hashlib.sha256()
    for f, relative, _, _ in listed:
        if relative is not None:
            h.update(relative.encode())
        with open(f, "rb") as fh:
            for block in iter(lambda fh=fh: fh.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


def read_prompt_answer_lines(path: Path) -> list[tuple[str, str]]:
    """(prompt, answer) of each line of a `{prompt, answer}` jsonl file (task jsonl).

    Raises:
        ValueError: naming the line, for anything but prompt/answer objects; fewer than 2 rows.
    """
    problems = []
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}:{i}: not JSON ({e.msg})") from None
        if not isinstance(row, dict) or not isinstance(row.get("prompt"), str) or "answer" not in row:
            raise ValueError(f'{path}:{i}: each line must be {{"prompt": str, "answer": str or number}}')
        problems.append((row["prompt"], str(row["answer"])))
    if len(problems) < 2:
        raise ValueError(f"{path}: needs at least 2 problems (one to train, one to evaluate), found {len(problems)}")
    return problems

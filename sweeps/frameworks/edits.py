"""A trainer's config file or run script edited in place, its comments and layout kept: YAML through ruamel.yaml's
round trip, TOML through tomlkit, a run script line by line (the words that set a key, wherever the script sets them).
"""

from __future__ import annotations

import re
from io import StringIO
from pathlib import Path
from typing import Any

import tomlkit
from ruamel.yaml import YAML


def is_script(path: Path, text: str) -> bool:
    """A shell script rather than a config file: ``.sh``, a shebang, or a launch command's continued lines."""
    return path.suffix in (".sh", ".bash") or text.startswith("#!") or bool(re.search(r"\\\r?\n\s*[-\w.+]+=", text))


def edit_yaml(text: str, changes: dict[str, Any]) -> str:
    """``text`` (YAML) with each dotted key set to its value, comments and order kept (ruamel.yaml round trip)."""
    ruamel = YAML()
    ruamel.preserve_quotes = True
    data = ruamel.load(text)
    for key, value in changes.items():
        *parents, leaf = key.split(".")
        node = data
        for p in parents:
            if node.get(p) is None:
                node[p] = {}
            node = node[p]
        node[leaf] = value
    out = StringIO()
    ruamel.dump(data, out)
    return out.getvalue()


def edit_toml(text: str, changes: dict[str, Any]) -> str:
    """``text`` (TOML) with each dotted key set, comments and order kept (tomlkit)."""
    doc = tomlkit.parse(text)
    for key, value in changes.items():
        *parents, leaf = key.split(".")
        node: Any = doc
        for p in parents:
            if p not in node:
                node[p] = tomlkit.table()
            node = node[p]
        node[leaf] = value
    return tomlkit.dumps(doc)


def edit_script(text: str, launch: re.Pattern[str], changes: dict[str, str]) -> str:
    """A run script with its settings changed: ``changes`` maps a word's key (``a.b=`` or ``--flag ``, with its
    separator) to the new word, replaced wherever the script sets it (its launch command, or an array the command
    expands; comment lines left alone); a key the script lacks is added on a line of its own after the launch
    command's first line. Comments, variables and the other lines stay as they are."""
    lines, missing = text.splitlines(keepends=True), []
    for key, word in changes.items():
        name = re.escape(key[:-1])
        if key.endswith("="):  # a hydra override a.b=value, quoted or not, after a blank or a quote
            pattern = re.compile(rf"(?<![\w.\-+])\+*{name}=(?:\"[^\"]*\"|'[^']*'|[^\s\\]*)")
        else:  # a flag and its value: --flag value or --flag=value
            pattern = re.compile(rf"(?<![\w\-]){name}(?:=|[ \t]+)(?:\"[^\"]*\"|'[^']*'|[^\s\\]+)")
        found = 0
        for i, line in enumerate(lines):
            if not line.lstrip().startswith("#"):
                lines[i], count = pattern.subn(word.replace("\\", "\\\\"), line)
                found += count
        missing += [] if found else [word]
    if missing:  # each on a continued line of its own after the launch command's first line
        at = next((i for i, line in enumerate(lines) if launch.search(line) and not line.lstrip().startswith("#")), None)
        if at is None:
            raise ValueError(f"no command matching {launch.pattern!r} in the script")
        head = lines[at].rstrip("\r\n")
        nxt = lines[at + 1] if at + 1 < len(lines) else ""
        indent = re.match(r"[ \t]*", nxt).group() or "    "  # type: ignore[union-attr]
        if head.rstrip().endswith("\\"):
            lines[at] = head + "\n" + "".join(f"{indent}{w} \\\n" for w in missing)
        else:
            lines[at] = head.rstrip() + "".join(f" \\\n    {w}" for w in missing) + "\n"
    return "".join(lines)

"""A trainer's config file or run script edited in place, its comments and layout kept: YAML through ruamel.yaml's
round trip, TOML through tomlkit, a run script line by line (the words that set a key, wherever the script sets them).
"""

from __future__ import annotations

import re
from io import StringIO
from pathlib import Path
from typing import Any

import yaml


def is_script(path: Path, text: str) -> bool:
    """A shell script rather than a config file: ``.sh``, a shebang, or a launch command's continued lines."""
    return path.suffix in (".sh", ".bash") or text.startswith("#!") or bool(re.search(r"\\\r?\n\s*[-\w.+]+=", text))


def edit_yaml(text: str, changes: dict[str, Any]) -> str:
    """``text`` (YAML) with each dotted key set to its value, comments and order kept (ruamel.yaml round trip)."""
    from ruamel.yaml import YAML  # imported where a file is edited, not when the CLI starts

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
    import tomlkit

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


def edit_yaml_lines(text: str, changes: dict[str, Any]) -> str:
    """``text`` (YAML) with each dotted key set and only the lines of those keys changed: a value is replaced on its
    key's line (its comment kept), a key the file lacks is added at the end of the deepest section it has (indented as
    that section's keys). The other lines stay as written (edit_yaml's round trip rewrites ``null``, ``True`` and long
    lines); a key whose value is a section, a list or on lines of its own goes through edit_yaml."""
    for key, value in changes.items():
        text = _set_yaml_line(text, key.split("."), value)
    return text


def _set_yaml_line(text: str, parts: list[str], value: Any) -> str:
    from ruamel.yaml import YAML
    from ruamel.yaml.comments import CommentedMap

    lines, data = text.splitlines(keepends=True), YAML().load(text)
    if not isinstance(data, CommentedMap):
        return edit_yaml(text, {".".join(parts): value})
    node, depth = data, 0
    while depth < len(parts) - 1 and isinstance(node.get(parts[depth]), CommentedMap) and node[parts[depth]]:
        node, depth = node[parts[depth]], depth + 1
    word = yaml.safe_dump(value, default_flow_style=True, width=1 << 20).removesuffix("\n...\n").strip()
    leaf = parts[depth]
    if depth == len(parts) - 1 and leaf in node:
        line, col = node.lc.key(leaf)
        m = re.compile(r"[^:]*:[ \t]+(\"[^\"]*\"|'[^']*'|[^#\r\n]*?)([ \t]*(?:#.*)?\r?\n?)$").match(lines[line], col)
        if m is None or isinstance(node[leaf], (dict, list)) or not m.group(1):
            return edit_yaml(text, {".".join(parts): value})
        lines[line] = lines[line][: m.start(1)] + word + m.group(2)
        return "".join(lines)
    if not node:
        return edit_yaml(text, {".".join(parts): value})
    last = list(node)[-1]
    line, indent = node.lc.key(last)[0], node.lc.key(list(node)[0])[1]
    end = next((i for i in range(line + 1, len(lines)) if lines[i].strip() and not lines[i].lstrip().startswith("#")
                and len(lines[i]) - len(lines[i].lstrip()) <= indent), len(lines))  # fmt: skip
    while end > line + 1 and (not lines[end - 1].strip() or lines[end - 1].lstrip().startswith("#")):
        end -= 1  # before the blank lines and comments that end the section
    added = [f"{' ' * (indent + 2 * i)}{part}:\n" for i, part in enumerate(parts[depth:-1])]
    added.append(f"{' ' * (indent + 2 * (len(parts) - 1 - depth))}{parts[-1]}: {word}\n")
    if end and not lines[end - 1].endswith("\n"):
        lines[end - 1] += "\n"
    return "".join(lines[:end] + added + lines[end:])

"""Words expanded as bash expands them (bash(1), "Parameter Expansion", "Arithmetic Expansion", "QUOTING"), without
running anything: ``$V``, ``${V}``, ``${V:-w}``, ``${V-w}``, ``${V:=w}``, ``$((expr))`` on integers, ``"${A[@]}"``, single
and double quotes. What only running a script would tell (``$(cmd)``, backticks, an unset variable without a
default) becomes an ``UNKNOWN`` marker around its source in the word (unknown_in, shown).
"""

from __future__ import annotations

import ast
import operator
import re
import shlex
from collections.abc import Mapping

UNKNOWN = "\ue000"  # brackets, in an expanded word, the source of something only running the script would tell
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_EMPTY = "\ue001"  # the word "${EMPTY[@]}" and "$@" expand to: no word at all
_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Mod: operator.mod, ast.Pow: operator.pow}


def _arith(expr: str, variables: Mapping[str, str]) -> str:
    """``$((expr))``: integers, + - * / % ** and parentheses, variables with or without ``$`` (bash's integer
    division truncates towards zero). Unknown when a variable is unset or not a number, or the expression is other."""
    expr = re.sub(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?", r"\1", expr)

    def value(node: ast.AST) -> int:
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.Name):
            return int(variables[node.id])
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -value(node.operand)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            a, b = value(node.left), value(node.right)
            return abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1)
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](value(node.left), value(node.right))
        raise ValueError(expr)

    try:
        return str(value(ast.parse(expr.strip(), mode="eval").body))
    except (SyntaxError, ValueError, KeyError, ZeroDivisionError, RecursionError):
        return UNKNOWN


def _parameter(body: str, variables: dict[str, str]) -> str:
    """``${body}``: V, V:-word, V-word, V:=word (the word expanded too); other forms are unknown."""
    m = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-=])(.*))?", body, re.S)
    if m is None:
        return UNKNOWN
    name, op, word = m.groups()
    value = variables.get(name)
    if op is None:
        return UNKNOWN if value is None else value
    empty = value is None or (op.startswith(":") and value == "")
    if not empty:
        return value  # type: ignore[return-value]
    word = re.sub(r"(?<!\\)[\"']", "", expand(word, variables, quoted=True))  # bash removes the word's quotes
    if op.endswith("="):
        variables[name] = word
    return word


def _closing(text: str, start: int, opening: str, closing: str) -> int:
    """The index of the ``closing`` that balances the ``opening`` before ``start``; -1 if none."""
    depth = 1
    for i in range(start, len(text)):
        depth += (text[i] == opening) - (text[i] == closing)
        if depth == 0:
            return i
    return -1


def expand(text: str, variables: dict[str, str], quoted: bool = False, arrays: Mapping[str, list[str]] = {}) -> str:
    """``text`` with its expansions done, its quotes kept for shlex (an expanded value is escaped so that its
    characters stay literal, as bash does not re-read quotes in a value). ``quoted``: text inside double quotes;
    ``arrays``: the script's arrays, whose ``"${A[@]}"`` is one word per element (none for an empty one, as ``"$@"``)."""
    out, i, in_double = [], 0, quoted
    while i < len(text):
        c = text[i]
        if c == "'" and not in_double:
            end = text.find("'", i + 1)
            end = len(text) - 1 if end < 0 else end
            out.append(text[i : end + 1])
            i = end + 1
            continue
        if c == "\\" and i + 1 < len(text):
            out.append(text[i : i + 2])
            i += 2
            continue
        if c == '"':
            in_double = not in_double if not quoted else in_double
        if c == "`":
            end = len(text) - 1 if text.find("`", i + 1) < 0 else text.find("`", i + 1)
            out.append(f"{UNKNOWN}{text[i : end + 1]}{UNKNOWN}")
            i = end + 1
            continue
        if c != "$" or i + 1 >= len(text):
            out.append(c)
            i += 1
            continue
        value, j = _dollar(text, i, variables, arrays)
        if isinstance(value, list):  # close the quotes around the elements, each a word
            elements = " ".join(map(shlex.quote, value))
            out.append(f'"{elements or _EMPTY}"' if in_double else elements)
            i = j
            continue
        value, i = (f"{UNKNOWN}{_source(text[i:j])}{UNKNOWN}" if value == UNKNOWN else value), j
        out.append(value.replace("\\", "\\\\").replace('"', '\\"') if in_double else _literal(value))
    return "".join(out)


def _source(text: str) -> str:
    """An unknown expansion as the user would name it: ``${HOME}`` and ``${X:-...}`` as ``$HOME``, ``$X`` (never
    ``${...}``, which the trainers' config readers would take for an interpolation)."""
    m = re.match(r"\$\{(\w+)", text)
    return f"${m.group(1)}" if m else text


def _literal(value: str) -> str:
    """An unquoted expansion: bash splits it at blanks, never re-reads its quotes or backslashes."""
    return " ".join(shlex.quote(word) for word in value.split()) if value.strip() else ""


def _dollar(text: str, i: int, variables: dict[str, str], arrays: Mapping[str, list[str]] = {}) -> tuple[str | list[str], int]:
    """The expansion that starts with the ``$`` at ``text[i]``: its value (an array's elements: a list) and the index
    after it."""
    nxt = text[i + 1]
    if m := re.compile(r"\$\{([A-Za-z_]\w*)\[[@*]\]\}").match(text, i):
        return list(arrays.get(m.group(1), [])), m.end()
    if text.startswith("$((", i):
        end = text.find("))", i + 3)
        return (UNKNOWN, len(text)) if end < 0 else (_arith(text[i + 3 : end], variables), end + 2)
    if nxt == "(":
        end = _closing(text, i + 2, "(", ")")
        return UNKNOWN, len(text) if end < 0 else end + 1
    if nxt == "{":
        end = _closing(text, i + 2, "{", "}")
        return (UNKNOWN, len(text)) if end < 0 else (_parameter(text[i + 2 : end], variables), end + 1)
    m = _NAME.match(text, i + 1)
    if m:
        return variables.get(m.group(), UNKNOWN), m.end()
    if nxt in "@*":  # "$@": the script's own arguments, none when read as a file
        return [], i + 2
    if nxt in "#?$!0123456789":
        return UNKNOWN, i + 2
    return "$", i + 1


def unknown_in(word: str) -> list[str]:
    """What an expanded word holds that only running the script would tell (``$HOME``, ``$(nproc)``): [] if nothing."""
    return word.split(UNKNOWN)[1::2]


def shown(word: str) -> str:
    """An expanded word as the user wrote its unknown parts (``$HOME/models``)."""
    return word.replace(UNKNOWN, "")

"""A trainer's run script read as bash would run it, up to its launch command: its statements, then that command's words.

Run scripts pass a trainer's settings as words of one command (``python3 -m verl.trainer.main_ppo a.b=c ...``, OpenRLHF's
``--flag value``) spread over backslash-continued lines and arrays, with shell variables that take a default from the
environment (``${TRAIN_BATCH_SIZE:-1024}``), ``case`` on the device and ``if`` on options. Bash is not run (a script is
never executed): the statements are interpreted here (assignments, arrays, ``case``, ``if`` over ``[ ]`` tests) and
their words expanded as bash would (sweeps.frameworks.expansion). A variable the script leaves unset takes its default,
never this machine's environment (the spec must not depend on who runs the importer); ``VAR=value`` given to the
importer sets it first. What cannot be known without running it stays marked in the word, refused later only if a
setting the importer reads holds one.
"""

from __future__ import annotations

import fnmatch
import operator
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass

from sweeps.frameworks.expansion import _EMPTY, expand, unknown_in

_ASSIGN = re.compile(r"^(?:export\s+|declare\s+(?:-[axr]+\s+)?|local\s+|readonly\s+)?([A-Za-z_][A-Za-z0-9_]*\+?)=(.*)$", re.S)


class ScriptError(ValueError):
    """A script this module cannot read (no launch command, unbalanced quotes); the message names the line."""


def logical_lines(text: str) -> list[str]:
    """The script's lines with backslash-newline continuations joined (bash(1): a quoted newline is removed)."""
    return re.sub(r"\\\r?\n", " ", text).splitlines()


@dataclass
class Script:
    """A run script's launch command as bash would run it: ``words`` after the matched command, and ``assumed``,
    the branches taken where a condition was unknown (said to the user: ``case $DEVICE: ... took gpu``)."""

    words: list[str]
    assumed: list[str]


@dataclass
class _Frame:
    """One open ``if`` or ``case``: whether its enclosing code runs, whether a branch ran, and this branch runs."""

    outer: bool
    taken: bool = False
    active: bool = False
    subject: str | None = None  # case: the expanded word
    variable: str | None = None  # case: the variable it is, when it is one


class _Interpreter:
    """The statements bash would run, read line by line: assignments (arrays too), ``if``/``elif``/``else`` over
    ``[ ]``/``[[ ]]`` tests, ``case`` patterns; the bodies of loops and functions are not run (run scripts set their
    settings in plain statements; a loop that sets one is a limit of this reading). A case on an unknown variable
    takes its first branch (the variable then holds that pattern); an unknown ``if`` condition is false (scripts
    guard their special cases so); each is recorded in ``assumed``."""

    def __init__(self, variables: Mapping[str, str]) -> None:
        self.env, self.given = dict(variables), set(variables)
        self.arrays: dict[str, list[str]] = {}
        self.frames: list[_Frame] = []
        self.assumed: list[str] = []

    @property
    def running(self) -> bool:
        return not self.frames or (self.frames[-1].outer and self.frames[-1].active)

    def words(self, text: str, number: int) -> list[str]:
        return [w.replace(_EMPTY, "") for w in _split(expand(text, self.env, arrays=self.arrays), number) if w != _EMPTY]

    def branch(self, frame: _Frame, verdict: bool | None, what: str) -> None:
        frame.active = bool(verdict) and not frame.taken
        frame.taken |= frame.active

    def statement(self, line: str, number: int) -> None:
        if m := re.match(r"(if|elif)\s+(.*)$", line):
            if m.group(1) == "if":
                self.frames.append(_Frame(self.running))
            verdict = self.test(m.group(2), number)
            if verdict is None and self.frames[-1].outer and not self.frames[-1].taken:
                self.assumed.append(f"if {m.group(2)}: only known when the script runs; read as false")
            self.branch(self.frames[-1], verdict, "")
        elif line in ("then", "do"):
            return
        elif line in ("else", "fi") and self.frames:
            self.branch(self.frames[-1], True, "") if line == "else" else self.frames.pop()
        elif m := re.match(r"case\s+(.*)\s+in$", line):
            subject, variable = self.words(m.group(1), number), re.fullmatch(r'"?\$\{?(\w+)\}?"?', m.group(1))
            self.frames.append(_Frame(self.running, subject=subject[0] if subject else "", variable=variable and variable[1]))
        elif line == "esac" and self.frames:
            self.frames.pop()
        elif self.frames and self.frames[-1].subject is not None and (m := re.match(r"\(?([^()]*)\)\s*(.*)$", line)):
            frame, patterns = self.frames[-1], [p.strip().strip("\"'") for p in m.group(1).split("|")]
            if unknown_in(frame.subject or "") and frame.variable and not frame.taken and frame.outer:  # its first branch
                self.env[frame.variable] = frame.subject = patterns[0]
                self.assumed.append(f"case ${frame.variable}: only known when the script runs; read as {patterns[0]!r}")
            self.branch(frame, any(fnmatch.fnmatchcase(frame.subject or "", p) for p in patterns), "")
            self.statement(m.group(2).removesuffix(";;").strip(), number) if m.group(2).strip(" ;") else None
        elif line.endswith(";;") and self.frames:
            self.statement(line.removesuffix(";;").strip(), number)
            self.frames[-1].active = False
        elif self.running and (m := _ASSIGN.match(line)):
            self.assign(m.group(1), m.group(2), number)
        elif self.running and re.match(r":\s", line):  # the null command, run for its ${V:=default} expansions
            self.words(line[1:], number)
        elif (
            self.running
            and (m := re.fullmatch(r"exit(?:\s+(.*))?", line))
            and (self.words(m[1] or "0", number) or ["0"])[0] != "0"
        ):
            raise ScriptError(f"line {number}: the script exits ({line}) before its launch command, as bash would run it")

    def assign(self, name: str, raw: str, number: int) -> None:
        append = name.endswith("+")
        name = name.rstrip("+")
        if raw.startswith("("):
            values = self.words(raw[1 : raw.rfind(")")], number)
            self.arrays[name] = (self.arrays.get(name, []) if append else []) + values
            return
        words = self.words(raw, number)
        if len(words) <= 1 and name not in self.given:  # more words: a command's prefix (X=1 cmd), not a variable
            self.env[name] = (self.env.get(name, "") if append else "") + (words[0] if words else "")

    def test(self, condition: str, number: int) -> bool | None:
        """A condition of ``[ ]``, ``[[ ]]`` and ``{ }`` tests joined by && and || (left to right, as bash); None
        when a part is not such a test or holds an unknown word."""
        parts = re.split(r"\s*(&&|\|\|)\s*", condition.strip())
        verdict = self._one(parts[0], number)
        for op, part in zip(parts[1::2], parts[2::2]):
            if verdict is None:
                return None
            if (op == "&&") == verdict:
                verdict = self._one(part, number)
        return verdict

    def _one(self, part: str, number: int) -> bool | None:
        part = part.strip().strip("{}; ").strip()
        negate = part.startswith("! ")
        m = re.fullmatch(r"\[\[?\s+(.*?)\s+\]\]?|test\s+(.*)", part.removeprefix("! ").strip())
        if m is None:
            return None
        words = self.words(m.group(1) or m.group(2), number)
        if any(unknown_in(w) for w in words):
            return None
        verdict = _compare(words)
        return None if verdict is None else verdict != negate


def _compare(words: list[str]) -> bool | None:
    if len(words) == 2 and words[0] in ("-z", "-n"):
        return (words[1] == "") == (words[0] == "-z")
    if len(words) != 3:
        return None
    a, op, b = words
    if op in ("=", "=="):
        return fnmatch.fnmatchcase(a, b)
    if op == "!=":
        return not fnmatch.fnmatchcase(a, b)
    numeric = {
        "-eq": operator.eq,
        "-ne": operator.ne,
        "-lt": operator.lt,
        "-le": operator.le,
        "-gt": operator.gt,
        "-ge": operator.ge,
    }
    try:
        return numeric[op](int(a), int(b)) if op in numeric else None
    except ValueError:
        return None


def statements(text: str) -> list[tuple[int, str]]:
    """(line number, statement) of a script: continuations joined, an array's lines ``NAME=( ... )`` joined, loop and
    function bodies left out, comments dropped."""
    out: list[tuple[int, str]] = []
    lines, skip, array, pending, start = logical_lines(text), 0, None, "", 0
    for number, raw in enumerate(lines, start=1):
        if pending or _open_quote(raw):  # a quoted string over several lines is one line of the statement
            start, pending = (start if pending else number), (f"{pending} {raw.strip()}" if pending else raw)
            if _open_quote(pending) and number < len(lines):
                continue
            raw, pending, number = pending, "", start
        line = raw.strip()
        if array is not None:  # an array's element lines, each without its comment
            out[-1] = (out[-1][0], f"{out[-1][1]} {_uncommented(line)}")
            array = None if re.search(r"(^|\s)\)\s*(#.*)?$", line) else array
            continue
        if not line or line.startswith("#"):
            continue
        opens = bool(re.match(r"(for|while|until)\b|(function\s+)?[\w-]+\s*\(\)\s*(\{|$)", line))
        if skip or opens:  # a loop's or a function's body: not run before the launch command
            skip += opens - bool(re.search(r"(^|[;\s])(done|\})\s*(#.*)?$", line))
            continue
        out += [(number, piece) for piece in _pieces(line)]
        if re.match(r"[A-Za-z_][A-Za-z0-9_]*\+?=\($", line) or (re.match(r"[A-Za-z_]\w*\+?=\(", line) and ")" not in line):
            array = number
    return out


def _open_quote(text: str) -> bool:
    """Whether ``text`` ends inside a quoted string (single or double quotes, outside comments)."""
    quote = ""
    for i, c in enumerate(text):
        if quote:
            quote = "" if c == quote and (quote == "'" or text[i - 1] != "\\") else quote
        elif c in "'\"" and (i == 0 or text[i - 1] != "\\"):
            quote = c
        elif c == "#" and (i == 0 or text[i - 1] in " \t"):
            return False
    return bool(quote)


def _uncommented(line: str) -> str:
    """A line up to its comment: a ``#`` that starts a word outside quotes (bash(1), COMMENTS)."""
    quote = ""
    for i, c in enumerate(line):
        if quote:
            quote = "" if c == quote else quote
        elif c in "'\"":
            quote = c
        elif c == "#" and (i == 0 or line[i - 1] in " \t"):
            return line[:i]
    return line


def _pieces(line: str) -> list[str]:
    """A line's statements: split at each ``;`` outside quotes and parentheses (not ``;;``, which ends a case
    branch), with ``then``, ``else`` and ``do`` apart from what follows them."""
    out, start, depth, quote = [], 0, 0, ""
    for i, c in enumerate(line):
        if quote:
            quote = "" if c == quote else quote
        elif c in "'\"":
            quote = c
        elif c in "({":
            depth += 1
        elif c in ")}":
            depth -= 1
        elif c == ";" and depth <= 0 and line[i - 1 : i] != ";" and line[i + 1 : i + 2] != ";":
            out.append(line[start:i])
            start = i + 1
    out.append(line[start:])
    pieces: list[str] = []
    for piece in (p.strip() for p in out):
        m = re.match(r"(then|else|do)\b\s*(.*)$", piece)
        pieces += [m.group(1), m.group(2)] if m else [piece]
    return [p for p in pieces if p]


def read_script(text: str, launch: re.Pattern[str], variables: Mapping[str, str] = {}) -> Script:
    """The words after the first command that ``launch`` matches (a word such as ``verl.trainer.main_ppo``), expanded
    as bash would with the statements before it; ``variables`` are set first and win over the script's own.

    Raises:
        ScriptError: no such command, or a line shlex cannot split (unbalanced quotes), naming the line.
    """
    shell = _Interpreter(variables)
    for number, line in statements(text):
        if launch.search(line) and shell.running:
            words = shell.words(line, number)
            for k, word in enumerate(words):
                if launch.fullmatch(word) or launch.search(word.rsplit("/", 1)[-1]):
                    return Script(words[k + 1 :], shell.assumed)
        shell.statement(line, number)
    raise ScriptError(f"no command matching {launch.pattern!r} in the script")


def _split(text: str, number: int) -> list[str]:
    try:
        return shlex.split(text, comments=True)
    except ValueError as e:
        raise ScriptError(f"line {number}: {e}") from None

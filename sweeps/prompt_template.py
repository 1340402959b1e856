"""A dataset task's ``prompt_template``: the file that formats a string prompt's content before it is templated.

Two kinds, as the trainers that have them: a ``.jinja`` file rendered with the variable ``content`` (EasyR1's
``data.format_prompt``, e.g. its examples/format_prompt/math.jinja: ``{{ content | trim }} You FIRST think ...``), or
any other file as text with one ``{}`` where the content goes (NeMo-RL's ``prompt_file``, e.g. its
examples/prompts/cot.txt, applied with ``str.format``: a literal brace is written ``{{`` or ``}}``). The controller
reads it at submit (service.preflight: a file that cannot format a prompt is a field error) and each worker reads it
again when it builds the task (workers.tasks.dataset), so both apply the same rule.
"""

from __future__ import annotations

import string
from collections.abc import Callable
from pathlib import Path

MAX_TEMPLATE_BYTES = 64 * 1024  # a prompt's wording, not data


def load_prompt_template(path: str | Path) -> Callable[[str], str]:
    """The function that formats a string prompt's content with the template file at ``path``.

    Raises:
        ValueError: the file cannot be read, is over MAX_TEMPLATE_BYTES, or cannot format a prompt (a .jinja file
            that does not parse or never uses ``content``; a text file without exactly one ``{}``); the message says
            what is allowed.
    """
    file = Path(path).expanduser()
    try:
        text = file.read_bytes()[: MAX_TEMPLATE_BYTES + 1].decode()
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"cannot read the template file ({type(e).__name__}: {e})") from None
    if len(text) > MAX_TEMPLATE_BYTES:
        raise ValueError(f"the template file is over {MAX_TEMPLATE_BYTES // 1024} KiB; allowed: a prompt's wording")
    return _jinja(text) if file.suffix == ".jinja" else _placeholder(text)


def _jinja(text: str) -> Callable[[str], str]:
    """A .jinja template rendered with ``content`` (EasyR1's format_prompt)."""
    import jinja2
    from jinja2 import meta

    env = jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=False)  # noqa: S701 - prompts, not HTML
    try:
        used = meta.find_undeclared_variables(env.parse(text))
        template = env.from_string(text)
    except jinja2.TemplateSyntaxError as e:
        raise ValueError(f"the .jinja template does not parse (line {e.lineno}: {e.message})") from None
    if "content" not in used:
        raise ValueError("the .jinja template never uses {{ content }}; allowed: a template that renders the prompt's content")
    if used - {"content"}:
        raise ValueError(f"the .jinja template uses {', '.join(sorted(used - {'content'}))}; allowed: the variable content alone")
    return lambda content: template.render(content=content)


def _placeholder(text: str) -> Callable[[str], str]:
    """A text template with one ``{}`` (NeMo-RL's prompt_file, filled by ``str.format``)."""
    try:
        fields = [name for _, name, _, _ in string.Formatter().parse(text) if name is not None]
    except ValueError as e:  # a single { or } (str.format's own rule)
        raise ValueError(f"the template is not a str.format text ({e}); write a literal brace as {{{{ or }}}}") from None
    if fields != [""]:
        found = "no {}" if not fields else ", ".join("{" + f + "}" for f in fields)
        raise ValueError(
            f"the template has {found}; allowed: exactly one {{}} where the prompt goes (a literal brace as {{{{ or }}}}), "
            "or a .jinja file that uses {{ content }}"
        )
    return lambda content: text.format(content)


def prompt_template_error(path: str | Path) -> str | None:
    """Why the template file at ``path`` cannot format a prompt (load_prompt_template's message), None when it can."""
    try:
        load_prompt_template(path)
    except ValueError as e:
        return str(e)
    return None

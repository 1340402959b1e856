"""Reading a spec file (sweeps.yamlfile: YAML 1.2 numbers, unique keys) and turning validation errors into field-named
messages."""

from __future__ import annotations

import difflib
import typing
from pathlib import Path
from typing import Any

from annotated_types import Ge, Gt, Le, Lt
from pydantic import BaseModel, Field

from sweeps.spec.grpo import TRL_ALIASES, GRPOSpec
from sweeps.spec.sweep import SweepSpec
from sweeps.yamlfile import read_yaml


def load_spec(path: str | Path) -> SweepSpec:
    """Read a YAML or JSON spec file (YAML is a superset of JSON) with sweeps.yamlfile.read_yaml: YAML 1.2 numbers, no
    tags, no duplicate keys. Relative file paths in it are relative to the file's folder (SweepSpec.with_paths_from).

    Raises:
        yaml.YAMLError: not YAML, or a tag.
        sweeps.yamlfile.AmbiguousYaml: a value YAML 1.1 reads as another number or boolean (names the key and line).
        ValueError: a duplicate key, or not a mapping.
        OSError: the file cannot be read.
        pydantic.ValidationError: the mapping is not a valid spec.
    """
    data = read_yaml(path)
    if not isinstance(data, dict):
        raise ValueError(f"a spec is a YAML mapping, got {type(data).__name__}")
    return SweepSpec.model_validate(data).with_paths_from(Path(path).resolve().parent)


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models an annotation can hold (through Annotated, unions, lists and dicts)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models_in(arg)]


TYPE_ERRORS = {"int_type", "int_parsing", "int_from_float", "float_type", "float_parsing"}  # pydantic's, of a number


def error_message(error: Any) -> str:
    """A pydantic error's message for people: an unknown field gets unknown_field_message, an unknown tag
    unknown_tag_message, a number of the wrong type the field's range (allowed_range), a validator's ValueError its own
    words (without pydantic's "Value error, ")."""
    loc = [p for p in error.get("loc", ()) if p != "body"]
    if error.get("type") == "extra_forbidden":
        return unknown_field_message(loc) or str(error.get("msg", ""))
    if error.get("type") == "union_tag_invalid":  # an unknown task name (or another tagged union's tag)
        return unknown_tag_message(error.get("ctx", {})) or str(error.get("msg", ""))
    if error.get("type") in TYPE_ERRORS and (allowed := allowed_range(loc)):
        return f"{error.get('msg', '')}; allowed: {allowed}"
    return str(error.get("msg", "")).removeprefix("Value error, ")  # pydantic's prefix for a validator's ValueError


def allowed_range(loc: tuple | list) -> str | None:
    """The values the SweepSpec field at ``loc`` takes, from its bounds: "an integer from 1 to 512", "a number more than
    0 to 256"; None for a field without bounds, or a path that is not one field of SweepSpec."""
    *parents, key = list(loc) or [None]
    models = _models_at(parents, SweepSpec)
    field = models[0].model_fields.get(key) if len(models) == 1 and isinstance(key, str) else None
    if field is None or field.annotation not in (int, float):
        return None
    words = [said.format(_number(getattr(m, a))) for kind, a, said in BOUNDS for m in field.metadata if isinstance(m, kind)]
    return f"{'an integer' if field.annotation is int else 'a number'} {' '.join(words)}" if words else None


BOUNDS = ((Ge, "ge", "from {}"), (Gt, "gt", "more than {}"), (Le, "le", "to {}"), (Lt, "lt", "below {}"))  # Field's


def _number(v: float) -> str:
    """A bound as written in a spec: 1000000, 0.5 (not 1e+06)."""
    return str(int(v)) if float(v).is_integer() else f"{v:g}"


def _models_at(parents: list, root: type[BaseModel]) -> list[type[BaseModel]]:
    """The models that can hold the field at path ``parents`` + [name] under ``root`` ([] when the path leaves them)."""
    models: list[type[BaseModel]] = [root]
    for part in parents:
        if isinstance(part, int):  # a list index: the models stay those of the list's items
            continue
        tagged = [m for m in models if part in typing.get_args(m.model_fields.get("name", Field()).annotation)]
        if tagged:  # a discriminated union's tag (task: arithmetic, dataset, ...)
            models = tagged
            continue
        fields = [m.model_fields[part] for m in models if part in m.model_fields]
        models = [sub for f in fields for sub in _models_in(f.annotation)]
        if not models:
            return []
    return models


def unknown_tag_message(ctx: dict[str, Any]) -> str | None:
    """For a ``union_tag_invalid`` error's context: "unknown name 'arithmetc'; did you mean arithmetic? allowed:
    arithmetic, bandit, ..." (the closest allowed tags by difflib); None without the tag and the allowed ones."""
    tag, expected = ctx.get("tag"), ctx.get("expected_tags")
    if not isinstance(tag, str) or not isinstance(expected, str):
        return None
    allowed = [t.strip().strip("'") for t in expected.split(",")]
    key = str(ctx.get("discriminator", "name")).strip("'")
    close = difflib.get_close_matches(tag, allowed, n=2, cutoff=0.6)
    hint = f"; did you mean {' or '.join(close)}?" if close else ""
    return f"unknown {key} {tag!r}{hint} allowed: {', '.join(allowed)}"


def unknown_field_message(loc: tuple | list, root: type[BaseModel] = SweepSpec) -> str | None:
    """For an ``extra_forbidden`` error at ``loc`` (a path into ``root``, its last item the unknown key): the
    allowed fields there and the closest ones ("did you mean temperature?"); None when loc is not a
    path into ``root``."""
    *parents, key = list(loc) or [None]
    models = _models_at(parents, root)
    if len(models) != 1 or not isinstance(key, str):
        return None
    allowed = list(models[0].model_fields) + (list(TRL_ALIASES) if models[0] is GRPOSpec else [])
    close = difflib.get_close_matches(key, allowed, n=2, cutoff=0.6)
    hint = f" (did you mean {' or '.join(close)}?)" if close else ""
    return f"unknown field {key!r}{hint}; allowed: {', '.join(allowed)}"

"""Writes the docs site's reference pages from the code, so they cannot drift from it.

docs/reference/cli.md from the typer app (service.cli), http.md from the app's OpenAPI document
(service.main.create_app), spec.md from the pydantic models (sweeps.spec.SweepSpec, each field's type,
default and description), metrics.md from sweeps.metrics. Run by `make docs` before `mkdocs build
--strict`; the pages are generated, not committed (.gitignore).

    .venv/bin/python docs/gen_reference.py [--out docs/reference]
"""

from __future__ import annotations

import argparse
import json
import sys
import types
import typing
from pathlib import Path

from pydantic import BaseModel

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def cli_page() -> str:
    """Every command of `groupscale` with its usage, help and options (from click, which typer builds on)."""
    import typer

    from service.cli import app

    root = typer.main.get_command(app)
    head = (
        "Generated from the typer app (`service/cli`). Exit codes: 0 success, 1 failure, 2 bad input; every error is "
        "one line on stderr."
    )
    lines = ["# CLI reference", "", head, ""]

    def walk(cmd, path: list[str]) -> None:  # typer's own click classes: duck-typed
        if hasattr(cmd, "commands"):
            for name in sorted(cmd.commands):
                walk(cmd.commands[name], [*path, name])
            return
        ctx = cmd.context_class(cmd, info_name=" ".join(path))
        lines.extend([f"## `{' '.join(path)}`", "", (cmd.help or "").strip(), "", "```", cmd.get_usage(ctx), "```", ""])
        params = [p for p in cmd.params if p.name != "help"]
        if params:
            lines.extend(["| argument or option | help | default |", "|---|---|---|"])
            for p in params:
                names = ", ".join(p.opts) if p.param_type_name == "option" else (p.metavar or p.name.upper())
                default = "" if p.required or p.default in (None, False, ()) else f"`{p.default}`"
                lines.append(f"| `{_cell(names)}` | {_cell(getattr(p, 'help', '') or '')} | {_cell(default)} |")
            lines.append("")

    walk(root, ["groupscale"])
    return "\n".join(lines)


def http_page() -> str:
    """Every path and method of the API with its summary, body and responses (from the OpenAPI document)."""
    from service.main import create_app
    from service.settings import Settings

    doc = create_app(Settings(database_url="sqlite://"), run_scheduler=False).openapi()
    lines = ["# HTTP API reference", "", "Generated from the app's OpenAPI document (served at `/docs` and `/openapi.json`).", ""]
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            about = (op.get("description") or "").strip()
            lines.extend([f"## `{method.upper()} {path}`", "", op.get("summary", ""), "", about, ""])
            params = op.get("parameters", [])
            if params:
                lines.extend(["| parameter | in | required | description |", "|---|---|---|---|"])
                for p in params:
                    required, about = p.get("required", False), _cell(p.get("description", ""))
                    lines.append(f"| `{p['name']}` | {p['in']} | {required} | {about} |")
                lines.append("")
            body = op.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
            if body:
                lines.extend([f"Body: `{body.get('$ref', json.dumps(body)).split('/')[-1]}`", ""])
            codes = ", ".join(f"{code} {r.get('description', '')}" for code, r in op.get("responses", {}).items())
            lines.extend([f"Responses: {codes}", ""])
    return "\n".join(lines)


def _type_name(tp: object) -> str:
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _type_name(typing.get_args(tp)[0])
    if origin is typing.Literal:
        return " | ".join(repr(a) for a in typing.get_args(tp))
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_type_name(a) for a in typing.get_args(tp))
    if origin is not None:
        return f"{getattr(origin, '__name__', str(origin))}[{', '.join(_type_name(a) for a in typing.get_args(tp))}]"
    return getattr(tp, "__name__", str(tp))


def _models(tp: object) -> list[type[BaseModel]]:
    """The pydantic models inside a field's type (a union of task specs, a list of rewards, ...)."""
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return [tp]
    return [m for a in typing.get_args(tp) for m in _models(a)]


def spec_page() -> str:
    """Every field of the sweep spec, section by section, with type, default and description."""
    from pydantic_core import PydanticUndefined

    from sweeps.spec import SweepSpec

    head = "Generated from the pydantic models of `sweeps/spec.py`: YAML and JSON specs validate against them."
    lines = ["# Spec reference", "", head, ""]
    seen: set[type] = set()
    queue: list[tuple[str, type[BaseModel]]] = [("(top level)", SweepSpec)]
    while queue:
        where, model = queue.pop(0)
        if model in seen:
            continue
        seen.add(model)
        lines.extend([f"## {where}: `{model.__name__}`", "", (model.__doc__ or "").strip().split("\n\n")[0], ""])
        lines.extend(["| field | type | default | description |", "|---|---|---|---|"])
        for name, field in model.model_fields.items():
            key = field.alias or name
            if field.default is PydanticUndefined and field.default_factory is None:
                default = "required"
            elif field.default_factory is not None:
                default = "(see its section)" if _models(field.annotation) else f"`{field.default_factory()}`"
            else:
                default = f"`{field.default}`"
            kind, about = _cell(_type_name(field.annotation)), _cell(field.description or "")
            lines.append(f"| `{key}` | {kind} | {_cell(default)} | {about} |")
            queue.extend((f"{key}", m) for m in _models(field.annotation))
        lines.append("")
    return "\n".join(lines)


def metrics_page() -> str:
    """What each trial logs to MLflow (sweeps.metrics)."""
    from sweeps import metrics

    lines = ["# Metrics reference", "", "Generated from `sweeps/metrics.py`: what every trial logs to MLflow.", ""]
    for title, table in (
        ("Every step (but those the trial's settings make constant: named in the run's description)", metrics.STEP),
        (
            "Held-out evals (at step 0, at the `eval.every` checkpoints, by default about T/4, T/2 and 3T/4, and at T; "
            "the result keeps step 0's as `<name>_initial` and each checkpoint's gap as `gap@<step>`)",
            metrics.EVAL,
        ),
        ("The probe inside trials (`probe.every`)", metrics.PROBE),
        ("Gradient-MSE trials (`measure: {kind: gradient_mse}`)", metrics.MEASURE),
        ("Families (by prefix)", metrics.PREFIXES),
    ):
        lines.extend([f"## {title}", "", "| metric | meaning |", "|---|---|"])
        lines.extend(f"| `{k}` | {_cell(v)} |" for k, v in table.items())
        lines.append("")
    return "\n".join(lines)


PAGES = {"cli.md": cli_page, "http.md": http_page, "spec.md": spec_page, "metrics.md": metrics_page}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "reference")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for name, page in PAGES.items():
        (args.out / name).write_text(page() + "\n")
        print(f"wrote {args.out / name}")


if __name__ == "__main__":
    main()

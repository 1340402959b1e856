"""``spec from-NAME FILE [key=value ...]`` for each trainer of sweeps.frameworks, and ``spec from FILE``, which tells
the trainer first: a sweep spec on stdout, what was assumed and not kept on stderr."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from service.cli.app import _fail, _ints, err, out, spec_app
from sweeps.frameworks import FRAMEWORKS, Framework

FileArg = Annotated[Path, typer.Argument(metavar="FILE", help="the trainer's config file or run script")]
Overrides = Annotated[
    list[str] | None,
    typer.Argument(
        metavar="[key=value ...]", help="the trainer's overrides, as on its command line; NAME=value sets a script's variable"
    ),
]  # fmt: skip
GroupSizes = Annotated[
    str | None, typer.Option(help="comma-separated G to sweep (default: the file's G, half, a quarter, twice, four times)")
]
Seeds = Annotated[int, typer.Option(min=1, max=1000, help="seeds per G")]
Steps = Annotated[int | None, typer.Option(min=1, help="T in optimizer steps (default: the file's, else 200)")]
Model = Annotated[str | None, typer.Option(help="a local model folder (default: the file's model)")]
EngineOpt = Annotated[str, typer.Option(help="the engine the trials train with: groupscale (the file's objective, translated)")]
Processes = Annotated[int, typer.Option(min=1, help="processes each trial trains on")]
Drop = Annotated[
    list[str] | None,
    typer.Option(help="a setting to train without (e.g. dynamic sampling, which groupscale refuses): G measured without it"),
]  # fmt: skip


def run_import(framework: Framework, file: Path, overrides, group_sizes, seeds, steps, model, engine, processes, drop) -> None:
    """The import itself: spec on stdout, notes on stderr; bad input or a refused setting exits 2."""
    from sweeps.frameworks.importing import spec_from
    from sweeps.yamlfile import dump_yaml

    if engine != "groupscale":
        _fail(f"--engine: {engine!r}; allowed: groupscale ({framework.title}'s objective runs on groupscale's trainer; "
              "engine trl trains TRL recipes: spec from-trl)", 2)  # fmt: skip
    sizes = _ints("--group-sizes", group_sizes) if group_sizes else None
    try:
        spec, notes = spec_from(framework, file, overrides or [], sizes, seeds, steps, model, processes, tuple(drop or ()))
    except ValueError as e:  # Refused too: a setting groupscale cannot train, named
        _fail(str(e) if str(file) in str(e) else f"{file}: {e}", 2)
    out.print(dump_yaml(spec), end="", highlight=False, markup=False, soft_wrap=True)
    for line in notes:
        err.print(line, highlight=False, markup=False, soft_wrap=True)
    err.print("fill in task.path and task.rewards before submitting", highlight=False, soft_wrap=True)


def _command(framework: Framework | None) -> None:
    """Register ``spec from-NAME`` for ``framework``, or ``spec from`` (None: the trainer recognised from the file)."""

    def command(
        file: FileArg,
        overrides: Overrides = None,
        group_sizes: GroupSizes = None,
        seeds: Seeds = 3,
        steps: Steps = None,
        model: Model = None,
        engine: EngineOpt = "groupscale",
        num_processes: Processes = 1,
        drop: Drop = None,
    ) -> None:
        chosen = framework or _recognised(file)
        run_import(chosen, file, overrides, group_sizes, seeds, steps, model, engine, num_processes, drop)

    if framework is None:
        command.__doc__ = "Recognise the trainer of FILE (a config or run script of one of the from-NAME trainers) and import it."
    else:
        command.__doc__ = f"Turn a {framework.title} config ({framework.files}) into a sweep spec (YAML on stdout)."
    spec_app.command(f"from-{framework.name}" if framework else "from")(command)


def _recognised(file: Path) -> Framework:
    """The trainer of ``file``, said on stderr; exit 2 naming the trainers when none or several fit."""
    from sweeps.frameworks.importing import recognise

    try:
        framework = recognise(file)
    except ValueError as e:
        _fail(str(e), 2)
    err.print(f"recognised {file} as {framework.title}'s (spec from-{framework.name})", highlight=False, soft_wrap=True)
    return framework


for _framework in [*FRAMEWORKS.values(), None]:
    _command(_framework)

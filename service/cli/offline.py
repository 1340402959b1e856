"""The commands that need no controller: law fit (a results table), models export (a preset folder), spec from-trl."""

from __future__ import annotations

import csv
import math
import shutil
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from service.cli.app import JsonOpt, _fail, _ints, _print_json, law_app, models_app, out, spec_app
from service.cli.render import print_fit
from sweeps.engines import ENGINES
from sweeps.frameworks.importing import recognise
from sweeps.spec import PRESET_NAMES


@models_app.command("export")
def models_export(
    preset: Annotated[str, typer.Argument(metavar="PRESET", help="chat-tiny or tiny-llama")],
    folder: Annotated[Path, typer.Argument(metavar="DIR", help="where the model folder is written (must not exist)")],
    task: Annotated[str, typer.Option(help="tiny-llama only: the built-in task it is warm-started on")] = "arithmetic",
) -> None:
    """Write a built-in preset as a plain Hugging Face model folder (point model.path at it)."""
    from service.settings import get_settings
    from workers.entry import build_preset

    language_models = [p for p in PRESET_NAMES if p != "tabular"]  # the tabular policy has no model folder
    if preset not in language_models:
        _fail(f"PRESET: unknown preset {preset!r}; allowed: {', '.join(language_models)}", 2)
    if preset == "tiny-llama" and task != "arithmetic":
        _fail(f"--task: tiny-llama is exported warm-started on a built-in task; allowed: arithmetic (got {task!r})", 2)
    if folder.exists():
        _fail(f"DIR: {folder} exists; give a new folder", 2)
    built = build_preset(preset, task, get_settings().model_cache_dir)
    shutil.copytree(built, folder)
    out.print(f"{preset} written to {folder} (load it with model: {{path: {folder.resolve()}}})")


def read_results(path: Path, y: str) -> tuple[list[int], list[int], list[int], list[float]]:
    """Columns group_size, samples_per_step, seed and y of a CSV. An empty or NaN y is missing (dropped later).

    Raises:
        ValueError: a missing column, a non-integer group_size/samples_per_step/seed (names row and column),
            or a (group_size, samples_per_step, seed) on more than one row (names the rows; lines count from 1,
            the header).
    """
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        need = ["group_size", "samples_per_step", "seed", y]
        missing = [c for c in need if c not in (reader.fieldnames or [])]
        if missing:
            raise ValueError(f"{path} lacks column(s) {', '.join(missing)}; found: {', '.join(reader.fieldnames or [])}")
        cols: tuple[list, list, list, list] = ([], [], [], [])
        for i, row in enumerate(reader, start=2):
            for col, name in zip(cols[:3], need[:3]):
                try:
                    number = float(row[name])
                    if not number.is_integer():  # 2.5 is not a group size: never truncated to 2
                        raise ValueError(name)
                    col.append(int(number))
                except (TypeError, ValueError, OverflowError):
                    raise ValueError(f"{path}:{i}: {name} must be a whole number, got {row[name]!r}") from None
            value = (row[y] or "").strip()
            try:  # an empty cell or NaN is a missing value (dropped and counted); other text is an error
                cols[3].append(float(value) if value else math.nan)
            except ValueError:
                raise ValueError(f"{path}:{i}: {y} must be a number (or empty for a missing value), got {value!r}") from None
    if any(g < 2 for g in cols[0]):
        raise ValueError(f"{path}: group_size must be >= 2")
    lines: dict[tuple[int, int, int], list[int]] = {}
    for i, key in enumerate(zip(*cols[:3]), start=2):
        lines.setdefault(key, []).append(i)
    repeated = [f"G={k[0]} B={k[1]} seed={k[2]} on rows {', '.join(map(str, n))}" for k, n in lines.items() if len(n) > 1]
    if repeated:
        raise ValueError(f"{path}: each (group_size, samples_per_step, seed) must appear once; repeated: {'; '.join(repeated)}")
    return cols


@law_app.command("fit")
def law_fit(
    results: Annotated[Path, typer.Argument(metavar="RESULTS.csv", help="one row per trial")],
    y: Annotated[str, typer.Option("--y", help="metric column (a gap: lower is better)")],
    maximize: Annotated[bool, typer.Option("--maximize", help="the metric is higher-is-better")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Fit gap(G) = a + b G + c/(G-1) per budget (THEORY.md) to a results table."""
    if not results.is_file():
        _fail(f"RESULTS.csv: no file {results}", 2)
    try:
        g, b, s, v = read_results(results, y)
    except ValueError as e:
        _fail(str(e), 2)
    from sweeps.fit import fit_law  # scipy: imported by the command that fits, not by every --help

    doc = fit_law(g, b, s, v, metric=y, maximize=maximize).model_dump(mode="json")
    _print_json(doc) if as_json else print_fit(doc)


Engine = StrEnum("Engine", {name: name for name in ENGINES})  # --engine's choices: sweeps.engines
RECIPE_AS_WRITTEN = Engine("trl")  # --engine's default: TRL trains the recipe as written


@spec_app.command("from-trl")
def spec_from_trl_command(
    config: Annotated[
        Path, typer.Argument(metavar="CONFIG.yaml", help="a TRL GRPO config (trl grpo --config) or a GRPOConfig dump")
    ],
    group_sizes: Annotated[str, typer.Option(help="comma-separated G to sweep, e.g. 2,4,8,16 (each divides B)")],
    seeds: Annotated[int, typer.Option(min=1, max=1000, help="seeds per G")] = 3,
    steps: Annotated[int | None, typer.Option(min=1, help="T (default: the recipe's max_steps, else 200)")] = None,
    model: Annotated[str | None, typer.Option(help="a local model folder (default: the recipe's model_name_or_path)")] = None,
    engine: Annotated[
        Engine,
        typer.Option(help="the engine the trials train with: trl keeps the recipe as written, the others get it translated"),
    ] = RECIPE_AS_WRITTEN,
    num_processes: Annotated[
        int | None, typer.Option(min=1, help="processes the recipe trains on (B is its generation batch there); default 1")
    ] = None,
    accelerate_config: Annotated[
        Path | None, typer.Option(help="an accelerate config whose num_processes the recipe trains on")
    ] = None,
) -> None:
    """Turn a TRL GRPO recipe into a sweep spec (YAML on stdout); what it did not keep goes to stderr."""
    from service.cli.app import err
    from sweeps.from_trl import spec_from_trl
    from sweeps.yamlfile import dump_yaml

    _not_another_trainers(config)
    data = _yaml_mapping(config, "CONFIG.yaml")
    processes = num_processes
    if accelerate_config is not None:
        if num_processes is not None:
            _fail("--num-processes and --accelerate-config: give one of them", 2)
        accelerate = _yaml_mapping(accelerate_config, "--accelerate-config", checked=("num_processes",))  # what is read
        processes = accelerate.get("num_processes", 1)
        if isinstance(processes, bool) or not isinstance(processes, int) or processes < 1:
            _fail(f"--accelerate-config: num_processes {processes!r} is not a whole number >= 1", 2)
        sharded = str(accelerate.get("distributed_type", "")).upper()
        if sharded in ("FSDP", "DEEPSPEED"):  # the trials run DDP: said, not silently dropped
            err.print(
                f"not applied: --accelerate-config distributed_type {sharded}; each trial's processes run DDP",
                highlight=False,
                soft_wrap=True,
            )
    try:
        spec, notes = spec_from_trl(
            data,
            _ints("--group-sizes", group_sizes),
            seeds=seeds,
            steps=steps,
            model=model,
            engine=engine.value,
            num_processes=processes or 1,
        )
    except ValueError as e:
        _fail(str(e), 2)
    out.print(dump_yaml(spec), end="", highlight=False, markup=False, soft_wrap=True)
    for line in notes:
        err.print(f"not kept: {line}", highlight=False, markup=False, soft_wrap=True)
    err.print("fill in task.path and task.rewards before submitting", highlight=False, soft_wrap=True)


def _not_another_trainers(config: Path) -> None:
    """Exit 2 naming the importer when ``config`` is another trainer's config or run script (TOML, a shell script:
    never read as a broken recipe)."""
    try:
        other = recognise(config)
    except ValueError:
        return
    _fail(f"CONFIG.yaml: {config} is {other.title}'s config or run script, not a TRL recipe: use spec from-{other.name}", 2)


def _yaml_mapping(path: Path, what: str, checked: tuple[str, ...] | None = None) -> dict:
    """A YAML file's mapping (sweeps.yamlfile: YAML 1.2 numbers, a value YAML 1.1 reads otherwise refused, as TRL and
    accelerate read these files with PyYAML; ``checked``: only those keys, the ones read of it); anything else exits 2
    naming ``what``. An accelerate config's ``distributed_type: NO`` (false to YAML 1.1) is not read as a number."""
    import yaml

    from sweeps.yamlfile import AmbiguousYaml, read_yaml

    try:
        data = read_yaml(path, checked)
    except AmbiguousYaml as e:
        _fail(f"{what}: {path}: {e}", 2)
    except (OSError, ValueError, yaml.YAMLError) as e:  # ValueError: undecodable text, a repeated key
        _fail(f"{what}: cannot read {path}: {type(e).__name__}: {(str(e).splitlines() or [''])[0]}", 2)
    if not isinstance(data, dict):
        _fail(f"{what}: {path} holds no mapping of settings", 2)
    return data

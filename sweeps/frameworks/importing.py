"""``spec from-NAME FILE``: a trainer's config as a sweep spec on groupscale's engine, the file's own G, B and objective
under groupscale's names, and what was not kept, grouped and short; ``spec from FILE`` tells the trainer first."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from sweeps.frameworks.base import FRAMEWORKS, Budget, Config, Framework, Refused
from sweeps.frameworks.edits import is_script
from sweeps.frameworks.files import load_mapping, nested
from sweeps.spec import valid_group_sizes

SHOWN = 6  # keys named per group of notes; the rest are counted
# keys (of any trainer) that shape the update or the sampling rather than where and how fast it runs: never counted
TRAINS = re.compile(r"lora|top_p|top_k|min_p|grad_clip|max_norm|clip_grad|clip_ratio_c|dual_clip|rollout_correction|"
                    r"is_correction|importance_sampling|overlong|reward_shaping|length_penalty|reward_scaling|weight_decay|"
                    r"warmup|scheduler|betas|optim\b|optimizer\b", re.I)  # fmt: skip


def recognise(path: Path) -> Framework:
    """The trainer whose config or run script ``path`` is. Raises ValueError naming what was looked for (``spec
    from-trl`` for a TRL recipe)."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"cannot read {path}: {type(e).__name__}") from None
    if is_script(path, text):
        found = [fw for fw in FRAMEWORKS.values() if fw.runs(path, text)]
    else:
        data = load_mapping(path)
        found = [fw for fw in FRAMEWORKS.values() if fw.recognises(data)]
    if not found and not is_script(path, text) and "num_generations" in load_mapping(path):
        raise ValueError(f"{path} is a TRL recipe (num_generations): use spec from-trl")
    if len(found) != 1:
        names = ", ".join(f"{fw.name} ({fw.files})" for fw in FRAMEWORKS.values())
        what = "none" if not found else " and ".join(fw.name for fw in found)
        raise ValueError(f"{path}: recognised as {what} of the trainers groupscale reads: {names}; use spec from-NAME")
    return found[0]


def read_budget(framework: Framework, path: Path, overrides: list[str]) -> tuple[Config, Budget]:
    """The file read as ``framework``'s (a config file must look like one: Framework.recognises), its budget, checked
    (Budget.check). Raises ValueError (Refused too) naming what is wrong."""
    config = framework.read(path, overrides)
    if not _is_script(path) and not framework.recognises(_given(config)):
        raise ValueError(f"not {framework.title}'s config or run script (spec from-{framework.name} reads {framework.files})")
    budget = framework.budget(config)
    budget.check()
    return config, budget


def _is_script(path: Path) -> bool:
    try:
        return is_script(path, path.read_text())
    except (OSError, UnicodeDecodeError):
        return False


def _given(config: Config) -> dict[str, Any]:
    """What the file and the overrides set, as one mapping of their written values (the file is not read again)."""
    from omegaconf import OmegaConf

    return nested({key: OmegaConf.select(config.values, key, throw_on_resolution_failure=False) for key in config.given})


def default_group_sizes(budget: Budget) -> list[int]:
    """The G a sweep tries by default: the file's G with half, a quarter, twice and four times it, those that give
    whole mini-batches of prompts (G divides B / k)."""
    allowed, g = set(allowed_group_sizes(budget)), budget.group_size
    candidates = [g, 2 * g, 4 * g, *(g // d for d in (2, 4) if g % d == 0)]
    return sorted({x for x in candidates if x in allowed})


def allowed_group_sizes(budget: Budget) -> list[int]:
    """G >= 2 that divide B / k: each of the k optimizer steps of a generation takes whole groups."""
    k = budget.grpo.get("steps_per_generation", 1)
    return valid_group_sizes(budget.samples_per_step // k) if budget.samples_per_step % k == 0 else []


def spec_from(
    framework: Framework,
    path: Path,
    overrides: list[str],
    group_sizes: list[int] | None = None,
    seeds: int = 3,
    steps: int | None = None,
    model: str | None = None,
    num_processes: int = 1,
    drop: tuple[str, ...] = (),
) -> tuple[dict[str, Any], list[str]]:
    """A sweep spec (plain data, for SweepSpec.model_validate) of the trainer's config at ``path`` with ``overrides``
    (``key=value``; in a script ``NAME=value`` sets its variable), and the notes (what was assumed, read and not kept).

    Args:
        group_sizes: the G to sweep (default: default_group_sizes); each must divide B / k.
        steps: T in optimizer steps (default: the file's, else 200); model: a local model folder (default: the file's).
        drop: keys the sweep trains without (a setting groupscale refuses, such as dynamic sampling): each is set to
            its off value and said in the notes.
    Raises:
        ValueError: the file cannot be read; Refused: a setting groupscale cannot train, naming the key.
    """
    config, budget = read_budget(framework, path, [*overrides, *(f"{key}=null" for key in drop)])
    allowed = allowed_group_sizes(budget)
    group_sizes = sorted(group_sizes or default_group_sizes(budget))
    bad = [g for g in group_sizes if g not in allowed]
    if bad or not group_sizes:
        raise ValueError(
            f"--group-sizes: {bad or group_sizes} do not give whole groups in each of the k = "
            f"{budget.grpo.get('steps_per_generation', 1)} optimizer steps of B = {budget.samples_per_step}; allowed: "
            + (", ".join(map(str, allowed)) or "none")
        )  # fmt: skip
    model_path = model or budget.model
    prompts, said = _prompts(framework, budget, path)
    rewards, scored = _rewards(framework, budget, path)
    spec: dict[str, Any] = {
        "name": f"from-{framework.name}-{str(model_path or 'model').rstrip('/').split('/')[-1]}",
        "engine": "groupscale",
        "task": {
            "name": "dataset",
            "path": f"FILL IN: a local data file{f' (the config trains {budget.data})' if budget.data else ''}",
            "prompt_column": "prompt",
            **prompts,
            "rewards": rewards,
        },
        "model": {"path": str(model_path or "FILL IN: a local model folder")},
        "group_sizes": group_sizes,
        "samples_per_step": [budget.samples_per_step],
        "seeds": list(range(seeds)),
        "steps": steps or budget.steps or 200,
        "grpo": {k: v for k, v in budget.grpo.items() if v is not None},
        "answer": {"baseline_group_size": budget.group_size},  # the G the config trains with: an answer keeps it or moves
        **({"resources": {"num_processes": num_processes}} if num_processes > 1 else {}),
    }
    _valid(spec)
    return spec, [*_notes(framework, config, budget, model, drop), *said, *scored]


def _prompts(framework: Framework, budget: Budget, path: Path) -> tuple[dict[str, str], list[str]]:
    """The task's prompt fields of the trainer's ``budget.prompts`` and a note on them: a template file found here (as
    named, or from the config's folder or one above it, where a trainer's relative paths start: EasyR1's and NeMo-RL's
    examples name theirs from the repository's root) by its absolute path; one not found is said and left out."""
    prompts = dict(budget.prompts)
    column = [f"its prompts: the data's {prompts['prompt_column']!r} (task.prompt_column)"] if "prompt_column" in prompts else []
    if "prompt_format" not in prompts:  # verl's and SkyRL's data prompts are message lists: auto
        return prompts, column
    template = prompts.pop("prompt_template", None)
    given = f"string prompts as {framework.title} gives them to the model: task.prompt_format {prompts['prompt_format']}"
    said = [*column, given]  # the format's line last: a template found extends it
    if template:
        found = _near(template, path)
        if found is None:
            said.append(f"its prompt template {template!r} is not here: put it under the data root and set task.prompt_template")
        else:
            prompts["prompt_template"] = str(found)
            said[-1] += f", formatted by task.prompt_template {found}"
    return prompts, said


def _rewards(framework: Framework, budget: Budget, path: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """The task's rewards of the trainer's ``budget.rewards`` (a placeholder when it names none) and notes on them: a
    function's file is looked for as a prompt template is (_near) and written by its absolute path when found; one not
    found is kept as written and said."""
    if not budget.rewards:
        return [{"function": "FILL IN: rewards.py:NAME"}], []
    rewards, said = [dict(entry) for entry in budget.rewards], []
    for i, entry in enumerate(rewards):
        file, _, name = str(entry.get("function", "FILL IN")).rpartition(":")
        if file.startswith("FILL IN") or not file:  # a placeholder or a server
            continue
        found = _near(file, path)
        if found is None:
            said.append(f"its reward file {file!r} is not here: put it under the reward root (GROUPSCALE_REWARD_ROOT) "
                        f"and set task.rewards[{i}].function")  # fmt: skip
        else:
            entry["function"] = f"{found}:{name}"
    shown = "; ".join(", ".join(f"{key} {value}" for key, value in entry.items()) for entry in rewards)
    return rewards, [f"rewards as {framework.title} scores them: task.rewards {shown}", *said]


def _near(name: str, path: Path) -> Path | None:
    """The file ``name`` as named, else from the folder of the config at ``path`` or one above it (where a trainer's
    relative paths start: its examples name files from the repository's root), resolved; None if not here."""
    places = [Path(name).expanduser(), *(folder / name for folder in path.resolve().parents)]
    return next((p.resolve() for p in places if p.is_file()), None)


def _valid(spec: dict[str, Any]) -> None:
    """The spec as submit will check it, the task's data and the model to fill in left aside (each reward entry is
    checked, a placeholder's pattern too). Raises ValueError naming the field
    (so an import never prints a spec that submit refuses for the file's own settings)."""
    from pydantic import ValidationError

    from sweeps.spec import SweepSpec, error_message
    from sweeps.spec.task import RewardSpec

    where = ""
    try:
        SweepSpec.model_validate({**spec, "task": {"name": "arithmetic"}, "model": {"preset": "tiny-llama"}})
        for i, entry in enumerate(spec["task"]["rewards"]):  # each as the trainer gives it, a placeholder's too
            where = f"task.rewards.{i}."
            RewardSpec.model_validate(entry)
    except ValidationError as e:
        first = e.errors()[0]
        where += ".".join(str(p) for p in first.get("loc", ()) if not str(p).startswith("function-"))
        raise ValueError(f"{where}: {error_message(first)}") from None


def _notes(framework: Framework, config: Config, budget: Budget, model: str | None, drop: tuple[str, ...]) -> list[str]:
    """What was assumed, read, dropped and not kept, each a line; long groups counted."""
    k = budget.grpo.get("steps_per_generation", 1)
    notes = [f"read {config.source} as {framework.title} ({framework.version})", *config.assumed]
    notes.append(
        f"its G = {budget.group_size}, B = {budget.samples_per_step} completions a generation, k = {k} optimizer steps "
        f"a generation, mu = {budget.grpo.get('inner_steps', 1)}"
    )
    notes += [f"dropped {key}: the sweep measures G without it" for key in drop]
    if budget.steps:
        notes.append(f"T = {budget.steps} optimizer steps, the file's (its generations x k); --steps sets another")
    if model is None and budget.model and not Path(budget.model).expanduser().is_dir():
        notes.append(f"model {budget.model!r} is not a local folder here: groupscale never downloads weights; pass --model DIR")
    rest = [key for key in config.given if key not in config.used and key not in drop]
    trains = [key for key in rest if TRAINS.search(key)]
    if trains:  # each named: a G measured without them may not be the file's
        notes.append(f"not kept, and each may change what trains (groupscale's defaults train instead): {', '.join(trains)}")
    rest = [key for key in rest if key not in trains]
    if rest:
        named = ", ".join(rest[:SHOWN]) + (f" and {len(rest) - SHOWN} more" if len(rest) > SHOWN else "")
        notes.append(f"not kept ({len(rest)} settings of parallelism, memory, data, logging: not needed to measure G): {named}")
    return notes


__all__ = ["Refused", "allowed_group_sizes", "default_group_sizes", "recognise", "spec_from"]

"""The paths of a spec that came over HTTP, as the controller stores and runs them.

A spec file's relative paths are relative to its folder (SweepSpec.with_paths_from; the CLI resolves them before it
sends the spec). A spec posted to the API has no folder: a relative reward FILE is resolved against
GROUPSCALE_REWARD_ROOT (the only place user code may come from), and every other relative path (data files, prompt
template, model folder) against the controller's working directory, where preflight reads it. Either is stored
absolute, so the workers read the file the controller checked, whatever their own working directory is; what was
resolved here is said (``relative_note``), in the submit answer's warnings or beside an error at that field.
"""

from __future__ import annotations

from pathlib import Path

from service.settings import Settings
from sweeps.spec import SweepSpec

Loc = tuple[str, ...]
HERE_FIELDS: tuple[Loc, ...] = (("task", "path"), ("task", "eval_path"), ("task", "prompt_template"), ("model", "path"))


def with_server_paths(spec: SweepSpec, settings: Settings) -> tuple[SweepSpec, dict[Loc, str]]:
    """The spec as it is stored and run (see the module's docstring), and, for each path resolved against the
    controller's working directory, its field path and what was done, in words."""
    spec, here, resolved = _rewards_under_root(spec, settings), Path.cwd(), {}
    updates: dict[str, dict[str, str]] = {}
    for section, name in HERE_FIELDS:
        value = getattr(getattr(spec, section), name, None)
        if not isinstance(value, str) or Path(value).expanduser().is_absolute():
            continue
        try:
            absolute = str((here / value).resolve())
        except (OSError, RuntimeError, ValueError):  # a link loop, bad bytes: preflight's check of the path says so
            continue
        updates.setdefault(section, {})[name] = absolute
        resolved[(section, name)] = (
            f"{section}.{name} {value[:200]!r} is relative: read from the controller's working directory {str(here)!r}"
        )
    for section, values in updates.items():
        spec = spec.model_copy(update={section: getattr(spec, section).model_copy(update=values)})
    return spec, resolved


def relative_note(spec: SweepSpec, loc: Loc, said: str) -> str:
    """The warning of an accepted spec whose path at ``loc`` was resolved here (``said``: with_server_paths' words)."""
    absolute = getattr(getattr(spec, loc[0]), loc[1])
    return (
        f"{said}, as {absolute!r} (stored so); give an absolute path, or submit with the CLI, which reads it from the "
        "spec file's folder"
    )


def _rewards_under_root(spec: SweepSpec, settings: Settings) -> SweepSpec:
    """The spec with each relative reward FILE resolved against GROUPSCALE_REWARD_ROOT. Unchanged without a reward
    root or a dataset task."""
    task, root = spec.task, settings.reward_root
    if task.name != "dataset" or root is None:
        return spec
    rewards = []
    for r in task.rewards:
        file, _, name = (r.function or "").rpartition(":")
        relative = bool(file) and not Path(file).expanduser().is_absolute()
        rewards.append(r.model_copy(update={"function": f"{root.expanduser().resolve() / file}:{name}"}) if relative else r)
    return spec.model_copy(update={"task": task.model_copy(update={"rewards": rewards})})

"""What an export is: one ``recommend --format``, registered by name, that writes a sweep's answer in another trainer's
keys and units from the engine's normalised objective (sweeps.engines.Recipe)."""

from __future__ import annotations

from typing import ClassVar

from sweeps.engines import Recipe
from sweeps.spec import valid_group_sizes


class ExportError(ValueError):
    """The answer cannot be written in this format. ``option``: the command option at fault (bad input), or None
    when the sweep's objective has no equivalent there."""

    def __init__(self, message: str, option: str | None = None) -> None:
        super().__init__(message)
        self.option = option


class Export:
    """One ``--format``: ``render`` writes the answer as the trainer reads it, ``header`` and the notes as comments.

    Attributes:
        name: the ``--format`` value; help: what it prints, in words.
    """

    name: ClassVar[str]
    help: ClassVar[str]

    def render(self, group_size: int, samples_per_step: int, recipe: Recipe, header: str, num_processes: int = 1) -> str:
        """The answer G at budget B on ``num_processes`` processes. Raises ExportError."""
        raise NotImplementedError


EXPORTS: dict[str, Export] = {}  # name -> the export, in registration order


def register_export(cls: type[Export]) -> type[Export]:
    """Class decorator: add an instance of ``cls`` to EXPORTS under ``cls.name``. Raises ValueError for a name that
    is taken (by another export, or by ``recommend``'s own text and json)."""
    if cls.name in (*EXPORTS, "text", "json"):
        raise ValueError(f"export {cls.name!r} is registered twice, or is recommend's own format")
    EXPORTS[cls.name] = cls()
    return cls


def get_export(name: str) -> Export:
    """The export called ``name``. Raises ValueError naming the valid formats."""
    try:
        return EXPORTS[name]
    except KeyError:
        raise ValueError(f"unknown export {name!r}; valid: {', '.join(EXPORTS)}") from None


def check_divides(group_size: int, samples_per_step: int) -> None:
    """Raises ValueError unless G >= 2 divides B, naming the allowed G."""
    allowed = valid_group_sizes(samples_per_step)
    if group_size not in allowed:
        raise ValueError(
            f"group_size {group_size} must be >= 2 and divide samples_per_step {samples_per_step}; "
            f"allowed: {', '.join(map(str, allowed)) or 'none (B < 2)'}"
        )


def comments(header: str, notes: list[str]) -> list[str]:
    """``header``'s lines and the notes as ``#`` comment lines (the formats that take comments)."""
    return [f"# {line}" for line in header.splitlines()] + [f"# note: {n}" for n in notes]

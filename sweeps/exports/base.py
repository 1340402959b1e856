"""What an export is: one ``recommend --format``, registered by name, that writes a sweep's answer in another trainer's
keys and units from the engine's normalised objective (sweeps.engines.Recipe)."""

from __future__ import annotations

from fractions import Fraction
from typing import Any, ClassVar

from sweeps.engines import Recipe
from sweeps.frameworks import Refused, get_framework
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


def recipe_grpo(recipe: Recipe) -> dict[str, Any]:
    """The recipe in the budget vocabulary (sweeps.frameworks.Budget's grpo): its grpo fields, with k the optimizer
    steps per generation (a Fraction: 1/n is n generations a step, as a TRL recipe may have)."""
    return recipe.grpo.model_dump() | {"steps_per_generation": Fraction(recipe.optimizer_steps_per_generation)}


class FrameworkExport(Export):
    """The export of a trainer of sweeps.frameworks: its settings for the answer, written as that trainer's command
    line takes them (Framework.words), the header and notes as comments."""

    framework: ClassVar[str]

    def render(self, group_size: int, samples_per_step: int, recipe: Recipe, header: str, num_processes: int = 1) -> str:
        """Raises ExportError (no option at fault) when the trainer cannot express the sweep's objective."""
        check_divides(group_size, samples_per_step)
        framework = get_framework(self.framework)
        try:
            settings = framework.settings(group_size, samples_per_step, recipe_grpo(recipe))
        except Refused as e:
            raise ExportError(f"{framework.title} cannot train what the sweep measured: {e}") from None
        notes = ["the learning rate is not carried over: a sweep's lr is tuned for its own model"]
        n = Fraction(recipe.optimizer_steps_per_generation).denominator
        if n > 1:
            notes.append(
                f"the recipe's {n} generations of B = {samples_per_step} per optimizer step are one {framework.title} batch"
            )
        return "\n".join([*comments(header, notes), *framework.words(settings)]) + "\n"

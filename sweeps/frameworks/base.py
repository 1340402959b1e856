"""What a GRPO trainer is to groupscale: one class per framework, registered by name, that reads the trainer's config as
its users have it into one budget vocabulary (``Budget``) and writes an answer back in the trainer's own keys and units.

The vocabulary, stated once (THEORY.md's notation): G completions per prompt; B completions per generation (N = B / G
prompts); k optimizer steps each generation feeds (its mini-batches of B / k completions, whole groups); mu passes over
each generation (PPO epochs); and the loss in groupscale's ``grpo:`` names (loss_aggregation, advantage, clip_eps,
clip_eps_high, importance_sampling_level, kl_beta, lr, temperature, max_new_tokens). Units are the trap each member
resolves: verl counts prompts where OpenRLHF counts samples; a member's docstring cites the file and version of each
key it reads.

A member declares: ``read`` (the file and ``key=value`` overrides into one mapping, ``Config``), ``recognises`` (whether
a mapping is its config, for ``spec from``), ``budget`` (the mapping in the vocabulary, refusing what changes the budget
that trains), ``settings`` (an answer in its keys) and how its files are edited (sweeps.frameworks.files).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from sweeps.frameworks.edits import edit_script, edit_toml, edit_yaml_lines, is_script
from sweeps.frameworks.expansion import shown, unknown_in
from sweeps.spec.base import MAX_GROUP_SIZE, MAX_SAMPLES_PER_STEP

if TYPE_CHECKING:  # OmegaConf is imported where a file is read, not when the CLI starts
    from omegaconf import DictConfig

MISSING = object()


class Refused(ValueError):
    """A setting of the file that groupscale cannot keep without changing what the sweep measures: the message names
    the key, its value, why, and what to do (exit 2 in the CLI)."""

    def __init__(self, key: str, value: Any, why: str) -> None:
        super().__init__(f"{key}: {value!r}: {why}")
        self.key = key


@dataclass(frozen=True)
class Budget:
    """A trainer's G, B and objective in groupscale's names and units.

    Attributes:
        group_size: G, completions per prompt.
        samples_per_step: B, completions per generation (prompts per generation x G).
        grpo: the objective as ``grpo:`` fields: steps_per_generation (k), inner_steps (mu), loss_aggregation,
            advantage, clip_eps, clip_eps_high, importance_sampling_level, kl_beta, lr, temperature, max_new_tokens
            (only those the file decides; the rest take the trainer's defaults, which the member fills in).
        model: the model folder or hub id the file trains, None if it names none.
        steps: T in optimizer steps (generations x k), None if the file does not say.
        data: the training data the file names (for the spec's task), None if none.
        prompts: how the trainer gives a string prompt to the model, as the spec's task fields: ``prompt_format``
            (chat or raw; absent: auto, for trainers whose data prompts are message lists) and ``prompt_template``
            (the template file as the config names it; sweeps.frameworks.importing finds it), and ``prompt_column``
            where the trainer names its data's prompt column.
        rewards: the trainer's reward as the spec's task.rewards entries (``function`` FILE.py:NAME with FILE as the
            config names it, which sweeps.frameworks.importing finds; ``url``; or a ``FILL IN:`` placeholder saying what
            to fill in), empty when the config names none.
    """

    group_size: int
    samples_per_step: int
    grpo: dict[str, Any]
    model: str | None = None
    steps: int | None = None
    data: str | None = None
    prompts: dict[str, str] = field(default_factory=dict)
    rewards: list[dict[str, Any]] = field(default_factory=list)

    def check(self) -> None:
        """What every trainer's budget must be for groupscale to train it: G >= 2, B a whole number of groups, k
        optimizer steps of whole groups each, within the spec's limits. Raises Refused naming what is wrong."""
        g, b, k = self.group_size, self.samples_per_step, self.grpo.get("steps_per_generation", 1)
        if not isinstance(k, int) or k < 1:
            raise Refused("k (optimizer steps per generation)", k, "must be a whole number >= 1")
        if not 2 <= g <= MAX_GROUP_SIZE:
            raise Refused("G (completions per prompt)", g, f"groupscale trains 2 to {MAX_GROUP_SIZE}")
        if not g <= b <= MAX_SAMPLES_PER_STEP or b % (g * k):
            raise Refused(
                "B (completions per generation)", b, f"must be whole groups of G = {g} in each of the k = {k} optimizer "
                f"steps (a multiple of G x k = {g * k}, at most {MAX_SAMPLES_PER_STEP})",
            )  # fmt: skip


@dataclass
class Config:
    """A trainer's settings as one mapping (file, then the script's or the user's ``key=value`` overrides), read key by
    key so that an interpolation or value nobody reads is never an error.

    Attributes:
        values: the merged settings (OmegaConf: ``${a.b}`` interpolations resolve as the trainer resolves them).
        given: the dotted keys the user's file and overrides set (a generated config sets every key).
        source: what was read (the file's name).
        assumed: what a run script left to the machine it runs on, and how it was read (sweeps.frameworks.shell).
    """

    values: DictConfig
    given: list[str]
    source: str
    assumed: list[str] = field(default_factory=list)
    used: set[str] = field(default_factory=set)

    def note(self, line: str) -> None:
        """Say ``line`` in the notes (once, however often a check reads its key)."""
        if line not in self.assumed:
            self.assumed.append(line)

    def get(self, key: str, default: Any = None, raw: bool = False) -> Any:
        """The value at the dotted ``key`` (``default`` when absent or null); marks it used. Raises Refused for a value
        only running the script would tell (``$HOME``, ``$(nproc)``; ``raw``: kept, for a value only shown) or an
        interpolation that does not resolve."""
        from omegaconf import DictConfig, ListConfig, OmegaConf
        from omegaconf.errors import OmegaConfBaseException

        self.used.add(key)
        try:
            value = OmegaConf.select(
                self.values, key, default=MISSING, throw_on_missing=False, throw_on_resolution_failure=not raw
            )
        except OmegaConfBaseException as e:
            raise Refused(key, "", f"does not resolve ({type(e).__name__}: {str(e).splitlines()[0]})") from None
        if value is MISSING or value is None or value == "???":
            return default
        if isinstance(value, (DictConfig, ListConfig)):
            return OmegaConf.to_container(value, resolve=False)
        if isinstance(value, str) and unknown_in(value) and not raw:
            raise Refused(
                key, shown(value), f"depends on {', '.join(unknown_in(value))}, which only running the script tells; "
                "give the variable after the file (NAME=value) or the setting (key=value)",
            )  # fmt: skip
        return value

    def named(self, key: str, names: dict[str, str], default: str | None = None) -> str:
        """The trainer's name at ``key`` (``default`` when unset) in groupscale's (``names``: trainer's -> ours).
        Raises Refused naming the names groupscale trains (and, with a default, what --drop measures)."""
        value = self.get(key, default)
        if value not in names:
            drop = "" if default is None else f"; --drop {key} measures G with {default}"
            ours = ", ".join(dict.fromkeys(names.values()))
            raise Refused(key, value, f"groupscale trains {', '.join(names)} (as {ours}){drop}")
        return names[value]

    def first_file(self, key: str) -> str | None:
        """The first of a data key's files (a list, or a string of one), as the user wrote it."""
        files = self.get(key, raw=True)
        if isinstance(files, str):
            files = re.findall(r"[^\[\]'\", ]+", files) or [files]
        return shown(str(files[0])) if isinstance(files, list) and files else None

    def text(self, key: str) -> str | None:
        """A value only shown to the user (a model or data path) as written (``$HOME/models/x``), None if absent."""
        value = self.get(key, raw=True)
        return None if value is None else shown(str(value))

    def number(self, key: str, default: Any = None, kind: type = int, minimum: float | None = None) -> Any:
        """``get`` as an int (or ``kind``), from a string too, as the trainer's parser reads it (ASCII digits only);
        with ``minimum``, required and at least that. Raises Refused if not."""
        value = self.get(key, default)
        if value is None:
            if minimum is not None:
                raise Refused(key, value, f"must be a number >= {minimum:g}")
            return None
        what = "whole number" if kind is int else "number"
        if isinstance(value, str) and not re.fullmatch(r"[\s+\-.0-9eE]*(inf|nan)?\s*", value, re.I):
            raise Refused(key, value, f"is not a {what}")
        try:
            if isinstance(value, bool) or (kind is int and isinstance(value, float) and not value.is_integer()):
                raise ValueError(value)
            number = kind(value) if isinstance(value, (int, float)) else kind(str(value).strip())
        except ValueError:
            raise Refused(key, value, f"is not a {what}") from None
        if minimum is not None and number < minimum:
            raise Refused(key, value, f"must be a number >= {minimum:g}")
        return number


def flat_keys(mapping: Any, prefix: str = "") -> list[str]:
    """The dotted paths of a nested mapping's leaves (a list is a leaf)."""
    if isinstance(mapping, dict) and mapping:
        return [k for key, value in mapping.items() for k in flat_keys(value, f"{prefix}{key}.")]
    return [prefix.rstrip(".")] if prefix else []


def fill_in(function: str, **entry: Any) -> list[dict[str, Any]]:
    """A reward entry to fill in whose ``function`` (FILE.py:NAME, so the spec's pattern holds) says what the trainer
    scores with: a trainer whose rewards are environments names no file groupscale can call."""
    return [{"function": f"FILL IN: {function}", **entry}]


def verifiers_rewards(env_id: str | None) -> list[dict[str, Any]]:
    """A verifiers environment's id (``reverse-text``, ``owner/reverse-text``) as the entry to fill in: its module's
    ``load_environment`` (verifiers imports the id with ``-`` as ``_``), convention verifiers; none without an id."""
    module = str(env_id).rsplit("/", 1)[-1].replace("-", "_")
    return fill_in(f"{module}.py:load_environment", convention="verifiers") if env_id else []


def whole(key: str, numerator: int, denominator: int, what: str) -> int:
    """numerator / denominator as a whole number. Raises Refused naming ``key`` when it is not one (``what``: the
    quotient in words)."""
    if denominator <= 0 or numerator % denominator:
        raise Refused(key, denominator, f"{what}: {numerator} / {denominator} is not a whole number")
    return numerator // denominator


class Framework:
    """One trainer whose configs come in (``spec from-NAME``) and whose keys go out (``recommend --format NAME``).

    Attributes:
        name: the CLI's name (``nemo-rl``); title: how its users write it (``NeMo-RL``).
        files: what ``read`` takes, in words (for --help).
        launch: the launch command of its run scripts (a regex over one word), None when it has none.
        version: the trainer's version whose keys and defaults the member reads.
        tied: the keys that move with G at a fixed B (all ``recommend --config`` changes).
    """

    name: ClassVar[str]
    title: ClassVar[str]
    files: ClassVar[str]
    version: ClassVar[str]
    launch: ClassVar[re.Pattern[str] | None] = None
    tied: ClassVar[tuple[str, ...]] = ()

    def read(self, path: Path, overrides: list[str]) -> Config:
        """The file's settings with ``overrides`` (``key=value``; in a script, ``NAME=value`` sets a variable).
        Raises ValueError naming the file and what could not be read."""
        raise NotImplementedError

    def runs(self, path: Path, text: str) -> bool:
        """Whether the run script at ``path`` (its ``text``) launches this trainer (``spec from``)."""
        return self.launch is not None and self.launch.search(text) is not None

    def recognises(self, data: dict[str, Any]) -> bool:
        """Whether a parsed config file (a mapping) is this trainer's (``spec from``)."""
        return False

    def budget(self, config: Config) -> Budget:
        """The config in the vocabulary. Raises Refused for a setting groupscale cannot train as the file asks."""
        raise NotImplementedError

    def settings(self, group_size: int, samples_per_step: int, grpo: dict[str, Any]) -> dict[str, Any]:
        """An answer in this trainer's keys and units: G at budget B (completions) with the objective ``grpo`` (the
        vocabulary's names). Raises Refused when the trainer cannot express it."""
        raise NotImplementedError

    def edit(self, path: Path, text: str, changes: dict[str, Any]) -> str:
        """The file's ``text`` with the settings ``changes`` made, the rest as it is: a run script's launch command
        (hydra words), TOML or YAML (comments kept)."""
        if self.launch is not None and is_script(path, text):
            return edit_script(text, self.launch, {f"{key}=": word for key, word in zip(changes, self.words(changes))})
        return edit_toml(text, changes) if path.suffix == ".toml" else edit_yaml_lines(text, changes)

    def words(self, settings: dict[str, Any]) -> list[str]:
        """Settings as its command line takes them, one a line (hydra's ``key=value``; a member may say otherwise)."""
        return [f"{key}={word(value)}" for key, value in settings.items()]


def word(value: Any) -> str:
    """A value as hydra and OmegaConf read it back (``True``, ``1e-06``, ``null``)."""
    return "null" if value is None else f"{value:g}" if isinstance(value, float) else str(value)


FRAMEWORKS: dict[str, Framework] = {}  # name -> the framework, in registration order


def register_framework(cls: type[Framework]) -> type[Framework]:
    """Class decorator: add an instance of ``cls`` to FRAMEWORKS. Raises ValueError for a name that is taken."""
    if cls.name in FRAMEWORKS:
        raise ValueError(f"framework {cls.name!r} is registered twice")
    FRAMEWORKS[cls.name] = cls()
    return cls


def get_framework(name: str) -> Framework:
    """The framework called ``name``. Raises ValueError naming the valid ones."""
    try:
        return FRAMEWORKS[name]
    except KeyError:
        raise ValueError(f"unknown framework {name!r}; valid: {', '.join(FRAMEWORKS)}") from None

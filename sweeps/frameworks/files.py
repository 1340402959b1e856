"""Trainers' config files read into one mapping and edited in place: YAML with ``defaults:`` and ``${...}``
interpolations (OmegaConf, as verl, NeMo-RL, EasyR1 and SkyRL load them), TOML (prime-rl), run scripts (their launch
command's ``key=value`` overrides or ``--flag value`` words); edits keep the file's comments and layout (ruamel.yaml,
tomlkit, the script's own lines).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from sweeps.frameworks.base import Config, flat_keys
from sweeps.frameworks.expansion import shown
from sweeps.frameworks.shell import Script, ScriptError, read_script

if TYPE_CHECKING:  # the config libraries are imported where a file is read, not when the CLI starts
    from omegaconf import DictConfig

MAX_DEFAULTS_DEPTH = 8  # a config that inherits from itself stops here


def _text(path: Path) -> str:
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"cannot read {path}: {type(e).__name__}") from None


def load_mapping(path: Path, depth: int = 0) -> dict[str, Any]:
    """A YAML or TOML file as a nested mapping, its ``defaults:`` (a file, or a list of files and hydra group entries
    ``group@package: option``) loaded first from the file's folder where they exist, then the file merged over them.
    ``${...}`` is left for the trainer's resolution (Config.get). Raises ValueError naming the file."""
    import tomllib

    from omegaconf import OmegaConf

    text = _text(path)
    if path.suffix == ".toml":
        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise ValueError(f"{path}: not TOML: {e}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ValueError(f"{path}: not YAML: {str(e).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path} holds no mapping of settings")
    defaults = data.pop("defaults", None)
    if depth >= MAX_DEFAULTS_DEPTH or not defaults:
        return data
    base: Any = OmegaConf.create({})
    for entry in [defaults] if isinstance(defaults, str) else defaults:
        found = _default_file(path.parent, entry)
        if found is not None:
            package, file = found
            loaded = load_mapping(file, depth + 1)
            base = OmegaConf.merge(base, OmegaConf.create(_at(package, loaded)))
    merged = OmegaConf.merge(base, OmegaConf.create(data))
    return OmegaConf.to_container(merged, resolve=False)  # type: ignore[return-value]


def _default_file(folder: Path, entry: Any) -> tuple[str, Path] | None:
    """A ``defaults:`` entry's file and the package (dotted path) it goes under, if it is in ``folder``."""
    if isinstance(entry, str):
        group, option, package = "", entry, ""
    elif isinstance(entry, dict) and len(entry) == 1:
        ((key, option),) = entry.items()
        group, _, package = str(key).partition("@")
        package = package or group.replace("/", ".")
    else:
        return None
    if not isinstance(option, str) or option == "_self_":
        return None
    for name in (option, f"{option}.yaml"):
        file = folder / group / name
        if file.is_file():
            return package, file
    return None


def _at(package: str, mapping: dict[str, Any]) -> dict[str, Any]:
    for part in reversed([p for p in package.split(".") if p and p != "_global_"]):
        mapping = {part: mapping}
    return mapping


def overrides_config(items: list[str]) -> tuple[DictConfig, list[str]]:
    """``key=value`` overrides (hydra's ``+key``/``++key`` too; values read as YAML, as hydra and OmegaConf do) as a
    mapping and the keys they set. Raises ValueError naming an override that is not ``key=value``."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    dotlist = []
    for item in items:
        key, eq, value = item.lstrip("+").partition("=")
        if not eq or not re.fullmatch(r"[\w.\-/]+", key):
            raise ValueError(f"override {item!r} is not key=value")
        dotlist.append(f"{key}={value}")
    try:
        return OmegaConf.from_dotlist(dotlist), [d.partition("=")[0] for d in dotlist]
    except (OmegaConfBaseException, yaml.YAMLError):
        for item in dotlist:  # the override at fault, named
            try:
                OmegaConf.from_dotlist([item])
            except (OmegaConfBaseException, yaml.YAMLError) as e:
                raise ValueError(f"override {shown(item)!r}: not a value the trainer reads ({type(e).__name__})") from None
        raise


def split_variables(overrides: list[str]) -> tuple[dict[str, str], list[str]]:
    """The importer's words: ``NAME=value`` (a shell variable's name: no dot, upper case or a name the script uses)
    set a script's variables; the rest are the trainer's ``key=value``."""
    variables = {k: v for k, _, v in (o.partition("=") for o in overrides if re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", o, re.S))}
    return variables, [o for o in overrides if o.partition("=")[0] not in variables]


def config_of(layers: list[tuple[dict[str, Any] | DictConfig, bool]], source: str, assumed: tuple[str, ...] = ()) -> Config:
    """One Config of the layers merged in order; a layer's keys count as given when its flag says so."""
    from omegaconf import OmegaConf

    merged: Any = OmegaConf.merge(*[OmegaConf.create(layer) if isinstance(layer, dict) else layer for layer, _ in layers])
    given = [k for layer, is_given in layers if is_given for k in flat_keys(_container(layer))]
    return Config(merged, list(dict.fromkeys(given)), source, list(assumed))


def _container(layer: dict[str, Any] | DictConfig) -> Any:
    from omegaconf import OmegaConf

    return layer if isinstance(layer, dict) else OmegaConf.to_container(layer, resolve=False)


def script_words(path: Path, launch: re.Pattern[str], variables: dict[str, str]) -> Script:
    """The launch command's words of a run script (sweeps.frameworks.shell). Raises ValueError naming the file, or a
    variable given that the script never uses (a typo would otherwise change nothing, silently)."""
    text = _text(path)
    unused = [name for name in variables if not re.search(rf"\$\{{?{name}\b", text)]
    if unused:
        raise ValueError(f"{path}: {', '.join(unused)}: the script uses no such variable (NAME=value sets a variable it reads)")
    try:
        return read_script(text, launch, variables)
    except ScriptError as e:
        raise ValueError(f"{path}: {e}") from None


def nested(changes: dict[str, Any]) -> dict[str, Any]:
    """Dotted keys as a nested mapping."""
    out: dict[str, Any] = {}
    for key, value in changes.items():
        *parents, leaf = key.split(".")
        node = out
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
    return out


def find_near(folder: Path, name: str) -> Path | None:
    """The file a run script names (``--config examples/configs/x.yaml``, ``config=examples/config.yaml``): absolute,
    or relative to the script's folder or a folder above it (run scripts run from their repository's root, a few
    levels up); None if it is not here."""
    path = Path(name).expanduser()
    if path.is_absolute():
        return path if path.is_file() else None
    return next((base / path for base in (folder, *folder.parents) if (base / path).is_file()), None)


def set_dotted(data: dict[str, Any], key: str, value: Any) -> None:
    """``data`` with the dotted ``key`` set in place, a number indexing a list (``a.source.0.b``): how an override
    reaches into a file's list of tables, which a merge of mappings cannot. Raises ValueError naming a part that is
    neither a table nor an index of the list."""
    parts = key.split(".")
    node: Any = data
    for depth, part in enumerate(parts):
        if isinstance(node, list) and not (part.isdigit() and int(part) < len(node)):
            raise ValueError(f"override {key}: {part!r} is not an index of the file's list")
        if not isinstance(node, (dict, list)):
            raise ValueError(f"override {key}: the part before {part!r} is not a table")
        at: Any = int(part) if isinstance(node, list) else part
        if depth == len(parts) - 1:
            node[at] = value
        else:
            node = node[at] if isinstance(node, list) else node.setdefault(part, {})


def flag_words(items: list[str]) -> list[str]:
    """Command-line flags as ``key=value`` words (pydantic-config's, as prime-rl takes them: ``--a.b-c value``,
    ``--a.b-c=value``, a bare ``--a.flag`` true and ``--no-a.flag`` false; dashes in a flag's name are underscores);
    ``key=value`` words as they are. Raises ValueError for pydantic-config's ``@ FILE``, which composes files."""
    words: list[str] = []
    i = 0
    while i < len(items):
        item, following = items[i], items[i + 1] if i + 1 < len(items) else None
        if "@" in (item, following):
            raise ValueError("'@ FILE' (files composed on the command line) is not read: give the file itself")
        flag, eq, value = item[2:].partition("=")
        if not item.startswith("--"):
            words, i = [*words, item], i + 1
            continue
        if eq:
            i += 1
        elif following is not None and not following.startswith("--"):
            value, i = following, i + 2
        else:
            flag, value, i = (flag[3:], "false", i + 1) if flag.startswith("no-") else (flag, "true", i + 1)
        words.append(f"{flag.replace('-', '_')}={value}")
    return words

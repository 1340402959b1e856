"""The one YAML reader and writer of spec files, TRL recipes and accelerate configs: YAML 1.2 numbers, never a number
read two ways.

PyYAML implements YAML 1.1, whose plain scalars differ from YAML 1.2's core schema (the current spec, and what
ruamel.yaml and most newer parsers read): ``1e-6`` is a string to 1.1 and a float to 1.2; ``010`` is 8 (octal) to 1.1
and 10 to 1.2; ``yes``/``no``/``on``/``off`` are booleans to 1.1 and strings to 1.2; ``1_000``, ``0b11`` and ``1:30``
are numbers to 1.1 only. TRL reads its recipes with PyYAML (1.1), and older groupscale read specs the same way.

``read_yaml``/``parse_yaml`` resolve plain scalars by YAML 1.2's core schema and refuse, naming the key and the line,
every plain scalar that YAML 1.1 reads as a different number or boolean: the same file must never mean one number
here and another in TRL. One exception: a scalar 1.1 reads as a string that converts to the same number (``1e-6``,
``1.5e3``, ``08``) is read as that number, as TRL's argument parser turns such a string into it too. Quoted scalars
are strings, as in every YAML. Besides, a mapping may not repeat a key (YAML would keep the last one silently).

A PyYAML SafeLoader subclass rather than ruamel.yaml: ruamel.yaml reads YAML 1.2 by default, so it would read
``yes`` and ``010`` otherwise than TRL does, silently; the comparison with 1.1 is needed all the same, and PyYAML is
already the one YAML library of the base install.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection
from pathlib import Path
from typing import IO, Any

import yaml

_BOOL, _INT, _FLOAT, _NULL, _STR = (f"tag:yaml.org,2002:{t}" for t in ("bool", "int", "float", "null", "str"))
_RETIRED = {_BOOL, _INT, _FLOAT, _NULL, "tag:yaml.org,2002:timestamp", "tag:yaml.org,2002:value"}  # 1.1's, replaced
# YAML 1.2.2, 10.3.2 (the core schema's tag resolution)
CORE_12 = [
    (_NULL, re.compile(r"^(?:~|null|Null|NULL|)$"), ["~", "n", "N", ""]),
    (_BOOL, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")),
    (_INT, re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$"), list("-+0123456789")),
    (
        _FLOAT,
        re.compile(r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"),
        list("-+.0123456789"),
    ),
]
SCALARS = (bool, int, float)


class AmbiguousYaml(ValueError):
    """A plain scalar that YAML 1.1 (PyYAML, TRL) and YAML 1.2 read as different values; the message names the
    key path, the line and both readings."""


class YamlLoader(yaml.SafeLoader):
    """safe_load with YAML 1.2's core schema for plain scalars, unique keys, and AmbiguousYaml for a scalar that
    YAML 1.1 reads as another number or boolean (see the module's docstring); ``checked``: the key paths checked so
    (``num_processes``, ``trl.beta``), None for all."""

    checked: frozenset[str] | None = None

    yaml_implicit_resolvers = {
        first: [(tag, regexp) for tag, regexp in resolvers if tag not in _RETIRED]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise ValueError(f"duplicate key {key!r} (line {key_node.start_mark.line + 1})")
            seen.add(key)
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        """A YAML 1.2 integer: decimal (a leading zero is still decimal), 0o octal or 0x hexadecimal."""
        value = str(self.construct_scalar(node))
        base = {"0o": 8, "0x": 16}.get(value[:2], 10)
        try:
            return int(value[2:] if base != 10 else value, base)
        except ValueError:
            raise yaml.constructor.ConstructorError(None, None, f"{value!r} is not a YAML 1.2 integer", node.start_mark) from None

    def get_single_data(self) -> Any:
        node = self.get_single_node()
        if node is None:
            return None
        _check(node, "", self, set(), self.checked)
        return self.construct_document(node)


for _tag, _regexp, _first in CORE_12:
    YamlLoader.add_implicit_resolver(_tag, _regexp, _first)
YamlLoader.add_constructor(_INT, YamlLoader.construct_yaml_int)


def _reading(loader: yaml.SafeLoader, value: str) -> Any:
    """What ``loader``'s resolvers and constructors make of the plain scalar ``value``."""
    node = yaml.ScalarNode(loader.resolve(yaml.ScalarNode, value, (True, False)), value)
    construct = loader.yaml_constructors.get(node.tag)  # 1.1's "=" (tag value) has none: PyYAML refuses it
    return value if construct is None else construct(loader, node)


def _show(v: Any) -> str:
    """A reading in YAML's words: true, 52, the text 'yes'."""
    return str(v).lower() if isinstance(v, bool) else f"the text {v!r}" if isinstance(v, str) else repr(v)


def _same(old: Any, new: Any) -> bool:
    """Whether YAML 1.1's reading ``old`` means YAML 1.2's ``new`` (a string that converts to the same number does)."""
    if isinstance(old, str) and type(new) in (int, float):
        try:
            return float(old) == new
        except ValueError:
            return False
    if type(old) is not type(new):
        return False
    return old == new or (isinstance(old, float) and math.isnan(old) and math.isnan(new))


def _check(node: yaml.Node, path: str, loader: YamlLoader, seen: set[int], checked: frozenset[str] | None = None) -> None:
    """Raise AmbiguousYaml at the first plain scalar under ``node`` (at ``path``) that 1.1 and 1.2 read differently; with
    ``checked``, only at those paths (a file of which only some keys are read: the others may mean what they like)."""
    if id(node) in seen:  # an alias: checked where its anchor is
        return
    seen.add(id(node))
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            _check(key, f"{path} key" if path else "a key", loader, seen, checked)
            name = key.value if isinstance(key, yaml.ScalarNode) else "?"
            _check(value, f"{path}.{name}" if path else str(name), loader, seen, checked)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _check(item, f"{path}[{i}]", loader, seen, checked)
    elif checked is not None and path not in checked:
        return
    elif node.style is None and node.tag == loader.resolve(yaml.ScalarNode, node.value, (True, False)):
        old, new = _reading(_YAML_11, node.value), _reading(loader, node.value)
        if (isinstance(old, SCALARS) or isinstance(new, SCALARS)) and not _same(old, new):
            how = (
                "true or false"
                if isinstance(old, bool) or isinstance(new, bool)
                else "the number without leading zeros, underscores, colons or a 0b/0o prefix"
            )
            raise AmbiguousYaml(
                f"{path or 'the document'} (line {node.start_mark.line + 1}): {node.value} is {_show(old)} to YAML 1.1 "
                f"(PyYAML, TRL) but {_show(new)} to YAML 1.2; write {how}, or quote it for text"
            )


_YAML_11 = yaml.SafeLoader("")  # its resolvers and constructors: what PyYAML, and so TRL, reads a scalar as


def parse_yaml(text: str | IO[str], checked: Collection[str] | None = None) -> Any:
    """YAML text (or a stream: then errors name its file) read by YamlLoader; ``checked``: the only key paths refused
    when ambiguous (the keys a caller reads of another tool's file), None for every value.

    Raises:
        yaml.YAMLError: not YAML, or an unknown tag.
        AmbiguousYaml: a plain scalar that YAML 1.1 reads as another number or boolean (names the key and line).
        ValueError: a repeated key.
    """
    loader = YamlLoader if checked is None else type("YamlLoader", (YamlLoader,), {"checked": frozenset(checked)})
    return yaml.load(text, Loader=loader)  # noqa: S506 - a SafeLoader subclass


def read_yaml(path: str | Path, checked: Collection[str] | None = None) -> Any:
    """A YAML (or JSON) file read by YamlLoader (``checked``: as parse_yaml).

    Raises:
        OSError, UnicodeDecodeError: the file cannot be read as UTF-8.
        yaml.YAMLError, AmbiguousYaml, ValueError: as parse_yaml.
    """
    with open(path, encoding="utf-8") as stream:  # a stream, so that a YAML error names the file, not "<unicode string>"
        return parse_yaml(stream, checked)


class YamlDumper(yaml.SafeDumper):
    """safe_dump that also quotes a string YAML 1.2 would read as a number or boolean ("1e5", "0o7"), so that what it
    writes reads back the same under either version."""


for _tag, _regexp, _first in CORE_12:
    YamlDumper.add_implicit_resolver(_tag, _regexp, _first)


def dump_yaml(data: Any) -> str:
    """``data`` as block YAML in insertion order that YamlLoader and PyYAML (YAML 1.1) both read back unchanged."""
    return yaml.dump(data, Dumper=YamlDumper, sort_keys=False)

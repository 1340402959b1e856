"""The one YAML reader: YAML 1.2 numbers, and a scalar that PyYAML (YAML 1.1, TRL's reader) reads as another number or
boolean refused naming the key and the line, never read silently one way."""

import itertools
import math

import pytest
import yaml

from sweeps.yamlfile import AmbiguousYaml, dump_yaml, parse_yaml, read_yaml


@pytest.mark.parametrize(
    "text, value",
    [
        ("1e-6", 1e-6),  # a string to YAML 1.1: refused by a float field before
        ("1E6", 1e6),
        ("1.5e3", 1500.0),  # 1.1 wants a sign in the exponent
        ("-2.5e-4", -2.5e-4),
        ("08", 8),  # not octal to 1.1 either: the text '08', which TRL's parser makes 8
        ("007", 7),  # octal 7 is 7
        ("0x1F", 31),
        ("+12", 12),
        ("0", 0),
        ("3.0", 3.0),
        (".5", 0.5),
        ("true", True),
        ("False", False),
        ("~", None),
        ("null", None),
        ("'010'", "010"),  # quoted: text, in every YAML
        ('"yes"', "yes"),
        ("2024-01-01", "2024-01-01"),  # 1.2 has no timestamps: text, never a date object
        ("word", "word"),
    ],
)
def test_plain_scalars_are_read_by_yaml_1_2s_core_schema(text, value):
    got = parse_yaml(f"x: {text}")["x"]
    assert got == value and type(got) is type(value)


@pytest.mark.parametrize(
    "text, where, old, new",
    [
        ("seeds: [0, 010]", "seeds[1] (line 1)", "8", "10"),
        ("samples_per_step: [064]", "samples_per_step[0] (line 1)", "52", "64"),
        ("name: x\ntrl:\n  use_vllm: no", "trl.use_vllm (line 3)", "false", "the text 'no'"),
        ("grpo: {stop: on}", "grpo.stop (line 1)", "true", "the text 'on'"),
        ("steps: 1_000", "steps (line 1)", "1000", "the text '1_000'"),
        ("steps: 0b11", "steps (line 1)", "3", "the text '0b11'"),
        ("steps: 1:30", "steps (line 1)", "90", "the text '1:30'"),
        ("steps: 0o17", "steps (line 1)", "the text '0o17'", "15"),
        ("steps: -0x1", "steps (line 1)", "-1", "the text '-0x1'"),
        ("010: x", "a key (line 1)", "8", "10"),
        ("a: {b: [1, {c: 1_0.5}]}", "a.b[1].c (line 1)", "10.5", "the text '1_0.5'"),
    ],
)
def test_a_scalar_yaml_1_1_reads_otherwise_is_refused_naming_the_key_line_and_both_readings(text, where, old, new):
    with pytest.raises(AmbiguousYaml) as e:
        parse_yaml(text)
    assert str(e.value).startswith(f"{where}: ") and f"is {old} to YAML 1.1 (PyYAML, TRL) but {new} to YAML 1.2" in str(e.value)
    assert "quote it for text" in str(e.value)


def test_no_plain_scalar_is_read_as_another_number_than_pyyaml_reads():
    """Every sign x body: refused, or read as PyYAML reads it, or as the number PyYAML's text converts to."""
    bodies = ["0", "00", "07", "010", "064", "08", "09", "1e-6", "1E6", "1.5e3", "1e", "e1", "1_0", "0b1", "0o7", "0x1F"]
    bodies += ["1:30", "1:30.5", ".5", "1.", ".inf", ".Inf", ".nan", "yes", "No", "ON", "off", "y", "n", "true", "~", "="]
    checked = 0
    for sign, body in itertools.product(["", "-", "+"], bodies):
        text = f"x: {sign}{body}"
        old = yaml.safe_load(text)["x"] if text != "x: =" else "="  # PyYAML cannot construct a lone "="
        try:
            new = parse_yaml(text)["x"]
        except AmbiguousYaml:
            continue
        checked += 1
        if isinstance(old, str) and isinstance(new, int | float) and not isinstance(new, bool):
            assert float(old) == new, text
        elif isinstance(old, float) and math.isnan(old):
            assert math.isnan(new), text
        else:
            assert old == new and type(old) is type(new), text
    assert checked > 40


def test_a_repeated_key_is_refused():
    with pytest.raises(ValueError, match=r"duplicate key 'name' \(line 2\)"):
        parse_yaml("name: a\nname: b\n")


def test_read_yaml_names_the_file_in_a_syntax_error(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("a: [1\n")
    with pytest.raises(yaml.YAMLError, match=f'in "{p}"'):
        read_yaml(p)


def test_what_dump_yaml_writes_both_yamls_read_back_unchanged():
    data = {"a": "1e5", "b": 1e-6, "c": "yes", "d": 10, "e": True, "f": "010", "g": "0o7", "h": None, "i": "1:30"}
    data |= {"j": [1.5e3, "text", "0x1F"], "k": {"nested": "off"}}
    text = dump_yaml(data)
    assert parse_yaml(text) == data and yaml.safe_load(text) == data
    assert list(parse_yaml(text)) == list(data)  # insertion order kept

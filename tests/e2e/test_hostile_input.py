"""Hostile input over real HTTP: hundreds of malformed specs, each refused with a 4xx that says where and why.

The cases are built deterministically from one valid spec (BASE): wrong types, huge numbers, NaN and
infinity in raw JSON, G not dividing B, unknown names and fields, path traversal, YAML tags in
strings, non-object bodies, invalid JSON, wrong content types, oversized bodies, hostile headers.
Every answer must be a 4xx (never 5xx, never 201) with a JSON ``detail``: for 422 a list of errors
each with a field path (``loc``) and a reason (``msg``), naming the field the case broke; otherwise a
reason string. Afterwards the store must hold no sweep and no probe. The CLI's YAML loader gets its
own cases (tags, duplicate keys, non-mappings): exit code 2 and a message naming the problem.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import func, select
from typer.testing import CliRunner

from service.cli import app
from service.store import Probe, Store, Sweep
from sweeps.spec import SweepSpec, valid_group_sizes

pytestmark = pytest.mark.e2e
# Validation happens before the store is touched: one backend (SQLite) is enough, and keeps this module short.
ON_ONE_STACK = pytest.mark.parametrize("stack", ["sqlite"], indirect=True)

MIN_CASES = 200
BODY_LIMIT = 1 << 20  # Settings.max_body_bytes default

# Valid, small and cheap: the cases below break it one way at a time.
BASE: dict = {
    "name": "hostile-base",
    "task": {"name": "arithmetic", "max_operand": 49},
    "model": {"preset": "tiny-llama"},
    "group_sizes": [2, 4, 8, 16],
    "samples_per_step": [64],
    "seeds": [0],
    "steps": 5,
    "checkpoint_every": 0,
    "grpo": {
        "advantage": "loo",
        "lr": 2e-4,
        "temperature": 1.0,
        "max_new_tokens": 4,
        "clip_eps": 0.2,
        "reward_scale": 1.0,
        "inner_steps": 1,
        "kl_beta": 0.0,
        "max_grad_norm": 1.0,
        "loss_aggregation": "seq_mean_token_mean",
        "optimizer": "adamw",
    },
    "eval": {"prompts": 16},
    "resources": {"gpus_per_trial": 0, "cpus_per_trial": 1},
    "measure": {"kind": "outcome", "repeats": 256},
    "probe": {"prompts": 8, "completions": 4, "projection_dim": 64, "seed": 0},
}

INT_FIELDS = [
    ("steps",),
    ("checkpoint_every",),
    ("task", "max_operand"),
    ("grpo", "max_new_tokens"),
    ("grpo", "inner_steps"),
    ("eval", "prompts"),
    ("measure", "repeats"),
    ("probe", "prompts"),
    ("probe", "completions"),
    ("probe", "projection_dim"),
    ("probe", "seed"),
]
FLOAT_FIELDS = [
    ("grpo", "lr"),
    ("grpo", "temperature"),
    ("grpo", "clip_eps"),
    ("grpo", "reward_scale"),
    ("grpo", "kl_beta"),
    ("grpo", "max_grad_norm"),
    ("resources", "gpus_per_trial"),
    ("resources", "cpus_per_trial"),
]
ENUM_FIELDS = [
    ("task", "name"),
    ("model", "preset"),
    ("grpo", "advantage"),
    ("grpo", "optimizer"),
    ("grpo", "loss_aggregation"),
    ("measure", "kind"),
]
LIST_FIELDS = [("group_sizes",), ("samples_per_step",), ("seeds",)]

# Values no int field accepts (strict: no "20" -> 20, no 20.0 -> 20, no true -> 1; bounds on every field).
BAD_INTS = {
    "str": "20",
    "float": 2.5,
    "whole_float": 20.0,
    "bool": True,
    "null": None,
    "list": [20],
    "object": {"$gt": 1},
    "1e308": 1e308,
    "10e30": 10**30,
    "neg_10e30": -(10**30),
    "neg": -1,
}
BAD_FLOATS = {"str": "0.1", "bool": True, "null": None, "list": [0.1], "object": {}, "1e308": 1e308, "10e30": 10**30, "neg": -1.0}
BAD_NAMES = {
    "unknown": "nope",
    "upper": "LOO",
    "empty": "",
    "padded": " loo ",
    "int": 1,
    "null": None,
    "list": ["loo"],
    "nul": "loo\x00",
    "traversal": "../../etc/passwd",
    "yaml_tag": "!!python/object/apply:os.system ['id']",
}
BAD_LISTS = {
    "scalar": 4,
    "str": "2,4",
    "null": None,
    "empty": [],
    "nested": [[2]],
    "str_items": ["2"],
    "float_items": [2.5],
    "bool_items": [True],
    "neg": [-2],
    "zero": [0],
    "huge": [10**30],
    "dup": [2, 2],
    "object": {"0": 2},
    "too_long": list(range(2, 2 + 65)),
}
HOSTILE_PATHS = {
    "traversal": "../../etc/passwd",
    "passwd": "/etc/passwd",
    "etc": "/etc",
    "root": "/",
    "home": "~root",
    "empty": "",
    "dotdot": "..",
    "proc_environ": "/proc/self/environ",
    "dev_zero": "/dev/zero",
    "long_4097": "a" * 4097,
    "long_segments": "x/" * 2000,
    "long_name": "/tmp/" + "a" * 300,
    "nul": "/tmp/\x00evil",
    "file_url": "file:///etc/passwd",
    "unc": "\\\\server\\share\\x",
    "env_var": "${HOME}/.ssh/id_rsa",
    "percent": "%2e%2e%2fetc%2fpasswd",
    "newline": "/tmp/x\n/etc/passwd",
    "yaml_tag": "!!python/object/apply:os.system ['id']",
    "surrogate": "\ud800",
}
YAML_TAGS = [
    "!!python/object/apply:subprocess.check_output [['id']]",
    "!!python/name:os.system",
    "!<tag:yaml.org,2002:str> arithmetic",
    "!!binary aGVsbG8=",
    "&a [*a]",
    "!!str tiny-llama",
]


@dataclass(frozen=True)
class Case:
    id: str
    body: bytes
    content_type: str | None = "application/json"
    field: tuple = ()  # the field path some error must name (after "body"); () for body-level errors
    status: int = 422
    msg_has: tuple[str, ...] = ()  # substrings some error message must contain
    headers: tuple[tuple[str, str], ...] = ()


def _set(spec: dict, path: tuple, value: object) -> dict:
    out = json.loads(json.dumps(spec))
    node = out
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return out


def _drop(spec: dict, path: tuple) -> dict:
    out = json.loads(json.dumps(spec))
    node = out
    for key in path[:-1]:
        node = node[key]
    del node[path[-1]]
    return out


def _json(doc: object) -> bytes:
    return json.dumps(doc).encode()


def _raw(path: tuple, literal: str) -> bytes:
    """The base spec with ``literal`` (e.g. NaN) written verbatim at path: json.dumps cannot emit these."""
    return json.dumps(_set(BASE, path, "@@RAW@@")).replace('"@@RAW@@"', literal).encode()


def _spec(pid: str, spec: dict, field: tuple, **kw: object) -> Case:
    return Case(pid, _json(spec), field=field, **kw)


def _gen() -> Iterator[Case]:
    dotted = ".".join
    # 1. Wrong types and out-of-range numbers in every int and float field.
    for path in INT_FIELDS:
        for tag, value in BAD_INTS.items():
            yield _spec(f"int:{dotted(path)}={tag}", _set(BASE, path, value), path)
    for path in FLOAT_FIELDS:
        for tag, value in BAD_FLOATS.items():
            yield _spec(f"float:{dotted(path)}={tag}", _set(BASE, path, value), path)
    # 2. NaN and infinity (and literals that overflow to infinity) in raw JSON.
    for path in [*FLOAT_FIELDS, ("steps",), ("task", "max_operand")]:
        for literal in ("NaN", "Infinity", "-Infinity"):
            yield Case(f"raw:{dotted(path)}={literal}", _raw(path, literal), field=path)
    for path, literal in [
        (("grpo", "lr"), "1e999"),
        (("steps",), "1e999"),
        (("grpo", "temperature"), "-1e999"),
        (("group_sizes",), "[2, NaN]"),
        (("samples_per_step",), "[Infinity]"),
        (("seeds",), "[-Infinity]"),
    ]:
        yield Case(f"raw:{dotted(path)}={literal}", _raw(path, literal), field=path)
    # 3. Unknown names and wrong types where the spec takes a name from a fixed list.
    for path in ENUM_FIELDS:
        for tag, value in BAD_NAMES.items():
            yield _spec(f"name:{dotted(path)}={tag}", _set(BASE, path, value), path[:1])
    # 4. Lists (G, B, seeds): wrong shapes, wrong item types, out of range, repeated, too long.
    for path in LIST_FIELDS:
        for tag, value in BAD_LISTS.items():
            if not (path == ("seeds",) and tag == "zero"):  # seed 0 is fine
                yield _spec(f"list:{dotted(path)}={tag}", _set(BASE, path, value), path)
    # 5. G: not dividing B (the message lists the valid G), G < 2, G > the largest allowed.
    for groups, budgets in [
        ([3], [64]),
        ([2, 5, 7], [64]),
        ([4, 6], [48, 64]),
        ([2, 4, 8, 16, 32], [48]),
        ([9], [10]),
        ([64], [32]),
    ]:
        bad_b = next(b for b in sorted(budgets) if any(b % g for g in groups))
        valid = ", ".join(map(str, valid_group_sizes(bad_b)))
        yield _spec(
            f"G:{groups}-not-dividing-B:{budgets}",
            {**BASE, "group_sizes": groups, "samples_per_step": budgets},
            ("group_sizes",),
            msg_has=("do not divide", f"valid group sizes for B={bad_b}: {valid}"),
        )
    for groups in ([1], [0], [1, 2], [-4], [8192]):
        yield _spec(f"G:{groups}", {**BASE, "group_sizes": groups, "samples_per_step": [8192]}, ("group_sizes",))
    # 6. Whole sections of the wrong type, nested junk, wrong combinations.
    for section in ("task", "model", "grpo", "eval", "resources", "measure", "probe"):
        for tag, value in {"str": "x", "list": [], "int": 1}.items():
            yield _spec(f"section:{section}={tag}", _set(BASE, (section,), value), (section,))
    for tag, value in {
        "null": None,
        "nested": {"name": {"name": "arithmetic"}},
        "missing_name": {"max_operand": 49},
        "bandit_with_llm": {"name": "bandit"},
        "bandit_one_arm": {"name": "bandit", "arms": 1},
        "arithmetic_small": {"name": "arithmetic", "max_operand": 8},
        "jsonl_no_path": {"name": "jsonl"},
        "jsonl_bad_reward": {"name": "jsonl", "path": "x", "reward": "fuzzy"},
        "jsonl_eval_1": {"name": "jsonl", "path": "x", "eval_fraction": 1.0},
        "surrogate_tag": {"name": "\ud800"},
    }.items():
        # a bandit task is refused at model: it needs the tabular preset
        yield _spec(f"task:{tag}", _set(BASE, ("task",), value), ("model",) if tag == "bandit_with_llm" else ("task",))
    for tag, value in {
        "null": None,
        "neither": {},
        "both": {"preset": "tiny-llama", "path": "/models/m"},
        "preset_false": {"preset": False},
        "tabular_for_arithmetic": {"preset": "tabular"},
        "trust_remote_code": {"preset": "tiny-llama", "trust_remote_code": True},
    }.items():
        yield _spec(f"model:{tag}", _set(BASE, ("model",), value), ("model",))
    yield _spec("grpo:lr-object-injection", _set(BASE, ("grpo", "lr"), {"$ne": None}), ("grpo", "lr"))
    yield _spec("grpo:clip_eps=1", _set(BASE, ("grpo", "clip_eps"), 1.0), ("grpo", "clip_eps"))
    yield _spec("grpo:temperature=0", _set(BASE, ("grpo", "temperature"), 0), ("grpo", "temperature"))
    yield _spec("resources:cpus=200", _set(BASE, ("resources", "cpus_per_trial"), 200), ("resources", "cpus_per_trial"))
    yield _spec("resources:gpus=64", _set(BASE, ("resources", "gpus_per_trial"), 64), ("resources", "gpus_per_trial"))
    yield _spec(
        "trials:over-limit",
        {**BASE, "seeds": list(range(64)), "group_sizes": [2, 4, 8, 16, 32, 64], "samples_per_step": [64, 128, 192]},
        ("seeds",),
    )
    # 7. Unknown extra fields, at the top and inside every section.
    for path in [
        ("extra",),
        ("__proto__",),
        ("constructor",),
        ("Name",),
        ("group_size",),
        ("task", "extra"),
        ("grpo", "gamma"),  # not "beta": TRL's name for kl_beta is accepted (sweeps.spec.TRL_ALIASES)
        ("eval", "extra"),
        ("resources", "memory"),
        ("probe", "x"),
        ("measure", "y"),
        ("\ud800",),
    ]:
        # a key that is not valid unicode fails the body as a whole, before any field
        yield _spec(f"extra:{dotted(path)!a}", _set(BASE, path, 1), () if path == ("\ud800",) else path)
    # 8. Required fields missing.
    for path in [("name",), ("task",), ("model",), ("group_sizes",), ("samples_per_step",)]:
        yield _spec(f"missing:{dotted(path)}", _drop(BASE, path), path)
    # 9. The sweep name: empty, too long, not a plain name.
    for tag, value in {
        "empty": "",
        "long": "a" * 129,
        "huge": "a" * 500_000,
        "traversal": "../x",
        "space": "a b",
        "leading_dash": "-a",
        "newline_end": "abc\n",
        "nul": "a\x00",
        "rtl": "a\u202eb",
        "emoji": "a🙂",
        "fullwidth": "ａｂｃ",
        "yaml_tag": "!!python/object/apply:os.system ['id']",
        "null": None,
        "int": 5,
        "list": ["a"],
        "surrogate": "\ud800",
    }.items():
        yield _spec(f"name:{tag}", _set(BASE, ("name",), value), ("name",))
    # 10. Path traversal and paths the OS refuses, in model.path and in task.path (jsonl).
    for tag, value in HOSTILE_PATHS.items():
        yield _spec(f"model.path:{tag}", _set(BASE, ("model",), {"path": value}), ("model",))
        yield _spec(f"task.path:{tag}", _set(BASE, ("task",), {"name": "jsonl", "path": value}), ("task",))
    # 11. YAML-ish tags and anchors where a string is expected.
    for i, tag in enumerate(YAML_TAGS):
        yield _spec(f"yaml:name#{i}", _set(BASE, ("name",), tag), ("name",))
        yield _spec(f"yaml:preset#{i}", _set(BASE, ("model", "preset"), tag), ("model",))
    # 12. Repeated keys whose last value is invalid (JSON keeps the last one).
    for key, first, last in [("steps", "5", '"5"'), ("name", '"a"', '""'), ("group_sizes", "[2]", "[3]")]:
        body = json.dumps(_drop(BASE, (key,)))[:-1] + f', "{key}": {first}, "{key}": {last}}}'
        yield Case(f"dup-key:{key}", body.encode(), field=(key,))
    # 13. Bodies that are not an object.
    for tag, body in {
        "list": "[]",
        "list_of_spec": json.dumps([BASE]),
        "string": '"spec"',
        "number": "42",
        "float": "3.14",
        "true": "true",
        "null": "null",
        "empty": "",
        "whitespace": "   \n",
    }.items():
        yield Case(f"non-object:{tag}", body.encode())
    # 14. Not JSON at all.
    good = json.dumps(BASE)
    for tag, body in {
        "open_brace": b"{",
        "single_quotes": good.replace('"', "'").encode(),
        "trailing_comma": good[:-1].encode() + b",}",
        "missing_value": b'{"name": }',
        "two_objects": good.encode() * 2,
        "comment": b"// spec\n" + good.encode(),
        "yaml": b"name: x\ntask: {name: arithmetic}\n",
        "latin1": b'{"name": "\xe9"}',
        "bad_utf8": b"\xff\xfe\xfd",
        "nul_bytes": b"\x00" * 16,
        "unterminated_string": b'{"name": "abc',
        "bare_word": b"spec",
        "deep_nesting": b"[" * 100_000 + b"]" * 100_000,
        "deep_nesting_in_field": b'{"name": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        "huge_int_literal": b'{"steps": ' + b"9" * 5000 + b"}",
    }.items():
        yield Case(f"invalid-json:{tag}", body, status=400 if tag.startswith(("deep", "huge", "bad_utf8", "latin1")) else 422)
    # 15. A valid spec under the wrong content type (or none): never read as JSON.
    for ct in (
        None,
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/xml",
        "application/yaml",
        "text/json",
        "application/octet-stream",
    ):
        yield Case(f"content-type:{ct}", good.encode(), content_type=ct)
    # 16. Oversized bodies: 413 with a reason, declared or streamed.
    yield Case("oversized:name", _json({**BASE, "name": "a" * (BODY_LIMIT + 1)}), status=413)
    yield Case("oversized:whitespace", b"{" + b" " * (BODY_LIMIT + 10) + b"}", status=413)
    yield Case("oversized:group_sizes", _json({**BASE, "group_sizes": [2] * (BODY_LIMIT // 2)}), status=413)
    yield Case("oversized:streamed", b"STREAM:" + b" " * (2 * BODY_LIMIT), status=413)
    # 17. Hostile headers on an otherwise valid spec.
    yield Case("header:idempotency-key-257", good.encode(), field=(), headers=(("Idempotency-Key", "k" * 257),))
    yield Case("header:idempotency-key-4k", good.encode(), field=(), headers=(("Idempotency-Key", "k" * 4096),))


CASES: list[Case] = list(_gen())


def _names_field(loc: list, field: tuple) -> bool:
    """loc (e.g. ["body", "task", "jsonl", "path"]) holds field's keys in order (discriminator tags may sit between)."""
    rest = iter(loc[1:])
    return all(any(part == key for part in rest) for key in field)


def _problem(case: Case, status: int, text: str) -> str | None:
    """What is wrong with the answer to case, or None."""
    if status != case.status:
        return f"HTTP {status} (want {case.status}): {text[:300]}"
    try:
        detail = json.loads(text)["detail"]
    except (ValueError, KeyError, TypeError):
        return f"HTTP {status} without a JSON detail: {text[:300]}"
    if status != 422:
        return None if isinstance(detail, str) and detail.strip() else f"no reason in detail: {text[:300]}"
    if not isinstance(detail, list) or not detail:
        return f"422 detail is not a non-empty list: {text[:300]}"
    for e in detail:
        if not (
            isinstance(e, dict)
            and isinstance(e.get("loc"), list)
            and e["loc"]
            and isinstance(e.get("msg"), str)
            and e["msg"].strip()
        ):
            return f"an error without loc and msg: {e!r}"
    if case.headers:
        return None if any(e["loc"][0] == "header" for e in detail) else f"no header named in {detail!r}"
    if case.field and not any(e["loc"][0] == "body" and _names_field(e["loc"], case.field) for e in detail):
        return f"no error names {'.'.join(map(str, case.field))}: {detail!r}"[:600]
    if not case.field and not any(e["loc"][0] == "body" for e in detail):
        return f"no error names the body: {detail!r}"[:600]
    for want in case.msg_has:
        if not any(want in e["msg"] for e in detail):
            return f"no message contains {want!r}: {detail!r}"[:600]
    return None


def _post(stack, endpoint: str, case: Case):
    headers = dict(case.headers)
    if case.content_type is not None:
        headers["content-type"] = case.content_type
    if case.body.startswith(b"STREAM:"):  # chunked: no Content-Length for the limit to read up front
        payload = case.body[len(b"STREAM:") :]
        content = (payload[i : i + 65536] for i in range(0, len(payload), 65536))
        return stack.http.post(endpoint, content=content, headers=headers)
    return stack.http.post(endpoint, content=case.body, headers=headers)


def test_cases_are_many_distinct_and_break_a_valid_spec():
    SweepSpec.model_validate(BASE)  # each case breaks a spec that is otherwise valid
    ids = [c.id for c in CASES]
    assert len(set(ids)) == len(ids), sorted({i for i in ids if ids.count(i) > 1})
    assert len({(c.body, c.content_type, c.headers) for c in CASES}) == len(CASES)
    assert len(CASES) >= MIN_CASES, len(CASES)


def _stored(stack) -> tuple[int, int]:
    """(sweeps, probes) in the controller's store (no GET lists probes: ask the store)."""
    store = Store(stack.database_url)
    try:
        with store.session() as s:
            return s.scalar(select(func.count()).select_from(Sweep)), s.scalar(select(func.count()).select_from(Probe))
    finally:
        store.engine.dispose()


@ON_ONE_STACK
@pytest.mark.parametrize("endpoint", ["/v1/sweeps", "/v1/probes"])
def test_hostile_specs_get_a_4xx_with_field_and_reason_and_nothing_is_stored(stack, endpoint):
    before = _stored(stack)
    failures = []
    for case in CASES:
        if case.headers and endpoint != "/v1/sweeps":  # only POST /v1/sweeps takes an Idempotency-Key
            continue
        r = _post(stack, endpoint, case)
        if r.status_code == 201 and endpoint == "/v1/sweeps":  # stop it before it trains on the shared CPUs
            stack.http.delete(f"/v1/sweeps/{r.json()['id']}")
        problem = _problem(case, r.status_code, r.text)
        if problem:
            failures.append(f"{case.id}: {problem}")
    print(f"{endpoint}: {len(CASES)} hostile cases, {len(failures)} answered wrongly")
    assert not failures, f"{len(failures)} of {len(CASES)} cases to {endpoint}:\n" + "\n".join(failures)
    health = stack.http.get("/v1/health")
    assert health.status_code == 200, health.text  # the controller survived all of it
    assert _stored(stack) == before  # not one sweep or probe was stored, even briefly


# The CLI reads YAML with a safe loader: no tags, no duplicate keys, a mapping at the top.
BASE_YAML = """\
name: cli-hostile
task: {name: arithmetic}
model: {preset: tiny-llama}
group_sizes: [2, 4]
samples_per_step: [8]
steps: 5
"""
CLI_CASES = {
    "python_object_apply": ("!!python/object/apply:os.system ['touch /tmp/groupscale-pwned']\n", "python/object/apply"),
    "python_object_in_field": (BASE_YAML.replace("name: cli-hostile", "name: !!python/object:os.system {}"), "python/object"),
    "python_name": (BASE_YAML + "grpo: !!python/name:os.system\n", "python/name"),
    "custom_tag": (BASE_YAML.replace("{preset: tiny-llama}", "!model {preset: tiny-llama}"), "!model"),
    "duplicate_top_key": (BASE_YAML + "steps: 500\n", "duplicate key 'steps'"),
    "duplicate_nested_key": (BASE_YAML.replace("{name: arithmetic}", "{name: arithmetic, name: bandit}"), "duplicate key 'name'"),
    "list": ("- name: x\n- name: y\n", "mapping, got list"),
    "scalar": ("just a string\n", "mapping, got str"),
    "empty": ("", "mapping, got NoneType"),
    "not_yaml": ("name: [unclosed\n", "line"),
    "G_not_dividing_B": (BASE_YAML.replace("[2, 4]", "[3]"), "valid group sizes for B=8: 2, 4, 8"),
    "string_for_int": (BASE_YAML.replace("steps: 5", "steps: '5'"), "steps"),
    "yaml_nan": (BASE_YAML + "grpo: {lr: .nan}\n", "grpo.lr"),
}


@ON_ONE_STACK
@pytest.mark.parametrize("case", list(CLI_CASES), ids=list(CLI_CASES))
def test_cli_submit_refuses_hostile_yaml_with_exit_2(stack, tmp_path, case, monkeypatch):
    text, expected = CLI_CASES[case]
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    monkeypatch.setenv("GROUPSCALE_URL", stack.url)
    r = CliRunner().invoke(app, ["submit", str(path), "--url", stack.url])
    assert r.exit_code == 2, (r.exit_code, r.output)
    assert expected in " ".join(r.output.split()), r.output
    assert not Path("/tmp/groupscale-pwned").exists()


# Free-form sections (trl:, model.chat_template_kwargs, a reward's kwargs) are not typed field by field: what the
# store cannot give back exactly is refused there (sweeps.spec.base.storable_json), and the list never dies.
def _free_form_bases() -> dict[str, tuple[tuple, dict]]:
    """Where each free-form section sits, in a spec that has it (the field, the spec)."""
    trl = {k: v for k, v in BASE.items() if k not in {"grpo", "measure"}}
    trl = {**trl, "engine": "trl", "model": {"path": "/nonexistent/model"}}
    dataset = {"name": "dataset", "path": "/nonexistent/d.jsonl", "rewards": [{"function": "r.py:f"}]}
    return {
        "template": (("model", "chat_template_kwargs"), BASE),
        "trl": (("trl",), trl),
        "kwargs": (("task", "rewards", 0, "kwargs"), {**BASE, "task": dataset}),
    }


REFUSED = {  # literal JSON (json.dumps will not write these), and what the 422 says
    "lone-surrogate": ('"\\ud800"', "not valid Unicode"),
    "surrogate-key": ('{"\\udfff": 1}', "not valid Unicode"),
    "surrogate-in-list": ('["ok", "\\udc80x"]', "not valid Unicode"),
    "nan": ("NaN", "finite numbers"),
    "infinity": ("Infinity", "finite numbers"),
    "minus-infinity": ("-Infinity", "finite numbers"),
    "nan-in-list": ("[1, NaN]", "finite numbers"),
    "deep-500": ("[" * 500 + "]" * 500, "nested deeper than"),
    "deep-40": ("[" * 40 + "]" * 40, "nested deeper than"),
    "deep-objects": ('{"a": ' * 40 + "1" + "}" * 40, "nested deeper than"),
}
STORED = {  # given back exactly
    "huge-string": "x" * 200_000,
    "unicode": "日本語 ✓ \U0001f600",
    "nul-char": "a\u0000b",
    "nested-20": json.loads("[" * 20 + "]" * 20),
    "big-int": 2**62,
    "tiny-float": 5e-324,
    "empty-object": {},
    "null": None,
    "bool": True,
    "mixed": [1, "a", None, 2.5, {"k": [True]}],
}


def _free_form_cases() -> Iterator[tuple[str, bytes, tuple, str | None]]:
    """(id, body, field, the 422's message, or None for a 201 that must give the section back exactly)."""
    for kind, (path, spec) in _free_form_bases().items():
        for tag, (literal, msg) in REFUSED.items():
            doc = json.dumps(_set(spec, path, {"bad": "@@RAW@@"}))
            yield f"{kind}:{tag}", doc.replace('"@@RAW@@"', literal).encode(), path[:1], msg
    path, spec = _free_form_bases()["template"]
    for tag, value in STORED.items():
        yield f"template:{tag}", _json(_set(spec, path, {"v": value})), path, None
    yield "template:list", _json(_set(spec, path, [1, 2])), path, "valid dictionary"
    yield "template:string", _json(_set(spec, path, "enable_thinking")), path, "valid dictionary"
    yield "template:nan-itself", _raw(path, "NaN"), path, "valid dictionary"


@ON_ONE_STACK
def test_free_form_values_are_refused_or_stored_exactly_and_the_list_stays_up(stack):
    cases = list(_free_form_cases())
    assert len(cases) >= 40, len(cases)
    failures = []
    for cid, body, field, msg in cases:
        r = stack.http.post("/v1/sweeps", content=body, headers={"content-type": "application/json"})
        listed = stack.http.get("/v1/sweeps")
        if listed.status_code != 200:
            failures.append(f"{cid}: GET /v1/sweeps answered {listed.status_code} after the POST's {r.status_code}")
        if msg is not None:
            problem = _problem(Case(cid, body, field=field, msg_has=(msg,)), r.status_code, r.text)
        elif r.status_code != 201:
            problem = f"HTTP {r.status_code} (want 201): {r.text[:300]}"
        else:
            sid = r.json()["id"]
            got = stack.http.get(f"/v1/sweeps/{sid}").json()["spec"]["model"]["chat_template_kwargs"]
            problem = None if got == json.loads(body)["model"]["chat_template_kwargs"] else f"given back as {str(got)[:80]}"
            stack.http.delete(f"/v1/sweeps/{sid}")  # cancelled before it trains on the shared CPUs
        if problem:
            failures.append(f"{cid}: {problem}")
    print(f"{len(cases)} free-form cases, {len(failures)} answered wrongly")
    assert not failures, "\n".join(failures)

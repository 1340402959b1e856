"""The docs cannot drift from the code: every spec in them validates, every `groupscale` line names a real command and
real options, and the reference pages are generated from the code (docs/gen_reference.py)."""

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import typer

from service.cli import app
from sweeps.spec import SweepSpec
from sweeps.yamlfile import parse_yaml

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
PAGES = [p for p in PAGES if "reference" not in p.relative_to(ROOT).parts]  # generated from the code
BASE = {"name": "docs", "task": {"name": "arithmetic"}, "model": {"preset": "tiny-llama"}}
BASE |= {"group_sizes": [2], "samples_per_step": [2]}
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


def _blocks(lang: str) -> list[tuple[str, str]]:
    return [(f"{p.relative_to(ROOT)}", body) for p in PAGES for kind, body in FENCE.findall(p.read_text()) if kind == lang]


def _specs() -> list[tuple[str, dict]]:
    """YAML blocks whose top-level keys are all spec fields: each is a spec, or sections of one."""
    fields = set(SweepSpec.model_fields)
    out = []
    for where, body in _blocks("yaml"):
        doc = parse_yaml(body)  # the reader of spec files (YAML 1.2 numbers)
        if isinstance(doc, dict) and doc and set(doc) <= fields:
            out.append((where, doc))
    return out


def test_the_docs_hold_specs_and_cli_lines_to_check():
    assert len(_specs()) >= 4 and len(_cli_lines()) >= 25  # the walk finds them (a changed fence style would not)


@pytest.mark.parametrize(("where", "doc"), _specs(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_spec_in_the_docs_validates(where, doc):
    SweepSpec.model_validate({**BASE, **doc})  # a partial block is sections of a spec: they validate in one


def _cli_lines() -> list[tuple[str, str]]:
    lines = []
    for where, body in _blocks("bash") + _blocks("") + _blocks("sh"):
        for line in body.splitlines():
            line = line.split(" #")[0].strip()
            if "groupscale " in line and not line.startswith("#"):
                lines.append((where, line[line.index("groupscale ") :]))
    return lines


def _tokens(line: str) -> list[str]:
    """The words of a CLI line, optional parts ``[--x ...]`` opened up and placeholders kept."""
    line = line.replace("[", " ").replace("]", " ").replace("|", " ").split(";")[0].split("&&")[0].split(" > ")[0]
    line = line.split(" & ")[0].rstrip("&").split(" \\")[0]
    try:
        return shlex.split(line)
    except ValueError:
        return line.split()


ROOT_COMMAND = typer.main.get_command(app)


@pytest.mark.parametrize(("where", "line"), _cli_lines(), ids=lambda v: v if isinstance(v, str) and len(v) < 60 else "")
def test_every_cli_line_in_the_docs_names_a_real_command_and_options(where, line):
    words = _tokens(line)[1:]
    cmd, path = ROOT_COMMAND, ["groupscale"]
    while hasattr(cmd, "commands") and words and not words[0].startswith("-"):
        assert words[0] in cmd.commands, f"{where}: `{line}`: no command {' '.join([*path, words[0]])!r}"
        cmd, path, words = cmd.commands[words[0]], [*path, words[0]], words[1:]
    if hasattr(cmd, "commands"):
        assert set(words) <= {"--help", "--version", "--install-completion"}, f"{where}: `{line}`"
        return
    opts = {o for p in cmd.params for o in getattr(p, "opts", []) + getattr(p, "secondary_opts", [])} | {"--help"}
    for w in words:
        if w.startswith("--"):
            assert w.split("=")[0] in opts, f"{where}: `{line}`: {' '.join(path)} has no option {w}; it has {sorted(opts)}"


def test_the_reference_pages_are_generated_from_the_code(tmp_path):
    gen = [sys.executable, str(ROOT / "docs" / "gen_reference.py"), "--out", str(tmp_path)]
    out = subprocess.run(gen, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    cli, spec = (tmp_path / "cli.md").read_text(), (tmp_path / "spec.md").read_text()
    assert "## `groupscale answer`" in cli and "`--budget`" in cli
    assert "`answer`" in spec and "sampled completions it may spend" in spec  # AnswerSpec.budget's description
    assert "/v1/answers" in (tmp_path / "http.md").read_text() and "`reward_mean`" in (tmp_path / "metrics.md").read_text()


def test_the_built_site_opens_from_disk_and_its_links_work(tmp_path):
    """`make docs`'s site opened as README says, from disk (file://.../site/index.html): its navigation opens pages,
    not directory listings (mkdocs' directory URLs made every link a folder, which Chromium lists)."""
    pytest.importorskip("material", reason="mkdocs-material (pip install -e '.[docs]')")
    from mkdocs.commands.build import build
    from mkdocs.config import load_config

    from tests.browser import CHROMIUM, FLAGS, require_chromium

    require_chromium()
    from playwright.sync_api import sync_playwright

    shutil.copytree(ROOT / "docs", tmp_path / "docs", ignore=shutil.ignore_patterns("reference"))
    gen = [sys.executable, str(ROOT / "docs" / "gen_reference.py"), "--out", str(tmp_path / "docs" / "reference")]
    assert subprocess.run(gen, capture_output=True, text=True).returncode == 0
    site = tmp_path / "site"
    build(load_config(str(ROOT / "mkdocs.yml"), docs_dir=str(tmp_path / "docs"), site_dir=str(site)))  # strict
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            page = browser.new_page()
            page.goto((site / "index.html").as_uri())
            assert "Choose the GRPO group size" in page.inner_text("body")
            pages = [
                ("Everyday use", "guides/everyday.html", "GROUPSCALE_WAIT_S"),
                ("CLI", "reference/cli.html", "groupscale answer"),
            ]
            for link, path, text in pages:
                page.get_by_role("link", name=link).first.click()
                page.wait_for_load_state()
                body = page.inner_text("body")
                assert page.url == (site / path).as_uri() and text in body and "Index of" not in body, (page.url, body[:500])
        finally:
            browser.close()


def test_readmes_byo_block_is_the_examples_own_spec():
    """README's "your model and your data" block is sweeps/examples/byo/spec.yaml (its header comment aside), so the
    `--task word-problems --model chat-tiny` of the commands under it come from a spec the reader has seen."""
    spec = (ROOT / "sweeps" / "examples" / "byo" / "spec.yaml").read_text()
    body = spec[spec.index("\nname:") + 1 :]
    readme = (ROOT / "README.md").read_text()
    blocks = [b for kind, b in FENCE.findall(readme) if kind == "yaml"]
    assert body in blocks, "no yaml block of README is sweeps/examples/byo/spec.yaml"
    doc = parse_yaml(body)
    commands = readme[readme.index(body) :]
    assert f"--task {doc['task']['label']} --model {doc['model']['preset']}" in commands


WORKED = {  # docs/development.md's worked examples: the module each block is, by its first line
    "# sweeps/engines/mine.py": "sweeps.engines.mine",
    "# workers/engines/mine.py": "workers.engines.mine",
    "# sweeps/exports/shell.py": "sweeps.exports.shell",
}


@pytest.fixture
def worked_examples(monkeypatch):
    """docs/development.md's "Adding an engine" and "Adding an export" blocks, each made the module it says it is
    (registering as it loads); the registries and modules are as before once the test ends."""
    from sweeps.engines import ENGINES
    from sweeps.exports import EXPORTS

    before = (dict(ENGINES), dict(EXPORTS))  # restored item by item below
    blocks = {body.splitlines()[0].split(" (")[0]: body for _, body in _blocks("python") if body.startswith("# ")}
    assert set(WORKED) <= set(blocks), sorted(blocks)
    for head, name in WORKED.items():
        module = type(sys)(name)
        monkeypatch.setitem(sys.modules, name, module)
        exec(compile(blocks[head], f"docs/development.md ({head[2:]})", "exec"), module.__dict__)
    yield
    for registry, kept in zip((ENGINES, EXPORTS), before, strict=True):
        registry.clear()
        registry.update(kept)


def test_adding_an_engine_and_an_export_as_the_docs_say_works(worked_examples, model_cache):
    """The engine the docs add is a spec's engine (its name in the schema, the CLI's choices) and trains a bandit
    trial within the harness to a succeeded result with the held-out gap; the export writes G and N."""
    from sweeps.engines import get_engine
    from sweeps.exports import get_export
    from sweeps.trial import TrialConfig, TrialOutcome
    from workers.measures import run_measure

    bandit = {"name": "mine", "task": {"name": "bandit"}, "model": {"preset": "tabular"}, "engine": "mine"}
    spec = SweepSpec.model_validate({**bandit, "group_sizes": [4], "samples_per_step": [16], "steps": 6})
    assert "mine" in SweepSpec.model_json_schema()["properties"]["engine"]["enum"]
    seen: dict[int, dict] = {}
    result = run_measure(TrialConfig.first_of(spec, model_cache), lambda m, s: seen.setdefault(s, {}).update(m))
    assert result.status is TrialOutcome.SUCCEEDED and result.steps_done == 6, result
    assert {"gap", "gap_initial"} <= set(result.metrics) and all("reward_mean" in seen[s] for s in range(1, 7))
    text = get_export("shell").render(4, 16, get_engine("mine").recipe(spec), "groupscale: G = 4")
    assert text == "# groupscale: G = 4\nNUM_GENERATIONS=4\nPROMPTS_PER_STEP=4\nTEMPERATURE=1\n"


def test_the_worked_examples_register_through_the_import_lines_the_docs_name(tmp_path):
    """Added as the docs say (a module, its name in the package's import line), a fresh interpreter that imports the
    packages has the engine and the export registered: an example that imported from the package itself would be a
    circular import there (the other test loads the examples after the packages)."""
    blocks = {body.splitlines()[0].split(" (")[0]: body for _, body in _blocks("python") if body.startswith("# ")}
    shutil.copytree(ROOT / "sweeps", tmp_path / "sweeps")
    for head, package, name in (
        ("# sweeps/engines/mine.py", "engines", "mine"),
        ("# sweeps/exports/shell.py", "exports", "shell"),
    ):
        (tmp_path / head[2:]).write_text(blocks[head])
        init = tmp_path / "sweeps" / package / "__init__.py"  # the import line of the members, as the docs say
        init.write_text(init.read_text().replace(f"from sweeps.{package} import ", f"from sweeps.{package} import {name}, ", 1))
    code = "import sweeps.engines, sweeps.exports; print(sorted(sweeps.engines.ENGINES), sorted(sweeps.exports.EXPORTS))"
    env = {**__import__("os").environ, "PYTHONPATH": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path, check=False)
    from sweeps.exports import EXPORTS

    assert done.stdout.split("\n")[0] == f"['groupscale', 'mine', 'trl'] {sorted([*EXPORTS, 'shell'])}", done.stderr[-2000:]

"""The torch line is a folder line, held by a rule over every import (module-level and inside functions alike): what the
controller needs of a trial lives in sweeps/, which imports neither workers/ nor service/ nor torch; service/ reaches
workers/ through one module (workers.entry) and imports no torch, transformers or TRL; workers/ never imports service/."""

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "transformers", "trl")


def imports(package: str) -> list[tuple[str, str, bool]]:
    """(file, imported module, at module level) for every absolute import in the package's product files (the
    examples' own scripts under sweeps/examples are left out: a user runs them with the whole project installed)."""
    out = []
    for path in sorted((ROOT / package).rglob("*.py")):
        if "migrations" in path.parts or "examples" in path.parts:
            continue
        tree = ast.parse(path.read_text())
        top = {id(node) for node in tree.body}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            out += [(str(path.relative_to(ROOT)), name, id(node) in top) for name in names]
    return out


def _in(module: str, *packages: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def test_sweeps_imports_neither_workers_nor_service_nor_torch():
    """TRL's engine may import TRL inside its check at submit (the controller's one use of it), never at load."""
    bad = [
        (f, m)
        for f, m, top in imports("sweeps")
        if _in(m, "workers", "service", "torch", "transformers") or (_in(m, "trl") and top)
    ]
    assert bad == []


def test_service_reaches_workers_through_workers_entry_alone_and_imports_no_torch():
    bad = [(f, m) for f, m, _ in imports("service") if (_in(m, "workers") and m != "workers.entry") or _in(m, *HEAVY)]
    assert bad == []


def test_workers_never_import_service():
    assert [(f, m) for f, m, _ in imports("workers") if _in(m, "service")] == []


@pytest.mark.parametrize("bad", ["from workers.batch import setup", "import torch", "from service.store import Store"])
def test_the_rule_sees_a_function_level_import(tmp_path, monkeypatch, bad):
    """A planted import inside a function of a sweeps/ module is found (the rule is not blind to local imports)."""
    package = tmp_path / "sweeps"
    package.mkdir()
    (package / "planted.py").write_text(f"def f():\n    {bad}\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert [m for _, m, top in imports("sweeps") if not top] == [bad.split()[1]]

"""The controller imports no torch or transformers: only workers load the trainer."""

import subprocess
import sys

import pytest


@pytest.mark.parametrize(
    "module", ["service.main", "service.scheduler.loop", "service.scheduler.ray_backend", "workers.entry", "workers.tune_lr"]
)
def test_the_controller_side_imports_no_torch(module):
    code = f"import sys, {module}; print(','.join(m for m in ('torch', 'transformers') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "", f"importing {module} imported {out}"


@pytest.mark.parametrize("argv", [["--help"], ["law", "--help"], ["recommend", "--help"], ["spec", "from-trl", "--help"]])
def test_the_cli_s_help_imports_no_heavy_library(argv):
    """A laptop that only submits sweeps gets its --help at once: no torch, Ray, scipy, numpy or MLflow."""
    code = (
        "import sys, runpy; sys.argv = ['groupscale', *sys.argv[1:]]\n"
        "try:\n    runpy.run_module('service', run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        "heavy = ('torch', 'ray', 'scipy', 'numpy', 'mlflow', 'sqlalchemy', 'fastapi')\n"
        "print(','.join(m for m in heavy if m in sys.modules), file=sys.stderr)"
    )
    out = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, check=True)
    assert "Usage" in out.stdout and out.stderr.strip().splitlines()[-1:] in ([], [""]), out.stderr


def test_no_import_circle_among_the_packages():
    """Module-level and function-level imports alike: no module of service, workers or sweeps reaches itself."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    modules = {
        ".".join(p.relative_to(root).with_suffix("").parts).removesuffix(".__init__"): p
        for pkg in ("service", "workers", "sweeps")
        for p in (root / pkg).rglob("*.py")
        if "migrations" not in p.parts
    }
    graph = {}
    for name, path in modules.items():
        deps = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            deps |= {t for t in targets if t in modules and t != name and not name.startswith(t + ".")}
        graph[name] = deps

    def reaches(start: str) -> list[str] | None:
        stack, seen = [(start, [start])], set()
        while stack:
            node, path = stack.pop()
            for dep in graph[node]:
                if dep == start:
                    return [*path, start]
                if dep not in seen:
                    seen.add(dep)
                    stack.append((dep, [*path, dep]))
        return None

    circles = [c for m in sorted(graph) if (c := reaches(m))]
    assert circles == [], circles[:3]


BLOCKED = """
import sys, importlib.abc
class Blocked(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in ('torch', 'transformers', 'trl'):
            raise ImportError(f'{name} is blocked: the controller must not need it for a groupscale-engine spec')
sys.meta_path.insert(0, Blocked())
from fastapi.testclient import TestClient
from service.main import create_app
from service.settings import Settings
from tests.factories import spec
with TestClient(create_app(Settings(data_dir=sys.argv[1]), run_scheduler=False)) as c:
    r = c.post('/v1/sweeps', json=spec(name='no-torch'))
    print(r.status_code, r.json().get('spec', {}).get('engine'))
"""


def test_a_groupscale_engine_spec_is_served_with_torch_transformers_and_trl_blocked(tmp_path):
    """The controller asks the engine (sweeps.engines) what it needs; only engine trl's check imports TRL."""
    done = subprocess.run([sys.executable, "-c", BLOCKED, str(tmp_path)], capture_output=True, text=True, check=False)
    assert done.stdout.split() == ["201", "groupscale"], done.stderr[-3000:]

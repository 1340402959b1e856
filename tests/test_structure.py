"""The code stays readable by rule: no product function over 60 lines, no module over 400 (migrations are generated and
frozen)."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_FUNCTION_LINES = 60
MAX_MODULE_LINES = 400


def test_no_product_function_is_over_60_lines():
    long = []
    for pkg in ("service", "workers", "sweeps"):
        for path in (ROOT / pkg).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    lines = node.end_lineno - node.lineno + 1
                    if lines > MAX_FUNCTION_LINES:
                        long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({lines} lines)")
    assert long == []


def test_no_product_module_is_over_400_lines():
    long = [
        f"{path.relative_to(ROOT)} ({lines} lines)"
        for pkg in ("service", "workers", "sweeps")
        for path in (ROOT / pkg).rglob("*.py")
        if "migrations" not in path.parts and (lines := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    ]
    assert long == []


def test_every_package_of_the_product_is_installed():
    """`pip install .` (the client, docker's images) installs pyproject's package list: a package missing from it
    fails at import on an installed machine, never in this checkout."""
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    packages = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for pkg in ("service", "workers", "sweeps")
        for init in (ROOT / pkg).rglob("__init__.py")
    }
    assert packages - listed == set()

"""The names a reward file imports, found by parsing it (``ast``), never by running it.

``imported_names(file, folder)``: the top-level names of the absolute imports (``import x.y``, ``from x import y``:
``x``) of FILE and of the modules of ``folder`` it imports, followed transitively (absolute imports of a module of
the folder, package-relative ones resolved against the importing file's package), at any depth of the code (an
import inside a function counts: verl's dispatcher imports its scorers when it is called). Imports made by name at
run time (``importlib.import_module(variable)``) are not seen.
"""

from __future__ import annotations

import ast
from pathlib import Path


def imported_names(file: Path, folder: Path) -> set[str]:
    """Top-level names FILE, and the modules under ``folder`` it reaches, import absolutely (see the module docstring)."""
    folder = folder.resolve()
    names: set[str] = set()
    seen: set[Path] = set()
    todo = [file.resolve()]
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        for name, module in _imports(path):
            if name:
                names.add(name)
            todo += [m for m in module if m.resolve().is_relative_to(folder)]
    return names


def _imports(path: Path) -> list[tuple[str | None, list[Path]]]:
    """(top-level name of an absolute import or None for a relative one, the files of ``path``'s folder it may run)
    for each import statement of ``path``; [] for a file that cannot be read or parsed."""
    try:
        tree = ast.parse(path.read_bytes(), filename=path.name)
    except (SyntaxError, ValueError, OSError):
        return []
    found: list[tuple[str | None, list[Path]]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.append((alias.name.split(".")[0], _files(_top(path), alias.name.split("."))))
        elif isinstance(node, ast.ImportFrom):
            parts = (node.module or "").split(".") if node.module else []
            if node.level:  # package-relative: from the importing file's package, level - 1 folders up
                base = path.parent
                for _ in range(node.level - 1):
                    base = base.parent
                name = None
            else:
                base, name = _top(path), parts[0]
            files = _files(base, parts) + [f for a in node.names for f in _files(base, [*parts, a.name])]
            found.append((name, files))
    return found


def _top(path: Path) -> Path:
    """The folder an absolute import of ``path`` starts from: above the chain of package folders it sits in."""
    root = path.parent
    while (root / "__init__.py").is_file():
        root = root.parent
    return root


def _files(base: Path, parts: list[str]) -> list[Path]:
    """The files importing ``parts`` (a dotted module path) from ``base`` runs: each package's __init__.py and the module."""
    out, here = [], base
    for part in [p for p in parts if p]:
        if (here / part / "__init__.py").is_file():
            here = here / part
            out.append(here / "__init__.py")
        elif (here / f"{part}.py").is_file():
            out.append(here / f"{part}.py")
            break
        else:
            break
    return out

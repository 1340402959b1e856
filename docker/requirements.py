"""Print the requirements of the given extras of pyproject.toml, one per line, for an image's pip layer.

    python docker/requirements.py server worker math > /tmp/requirements.txt   # in the folder of pyproject.toml

The base dependencies come first; an extra that names groupscale's own extras (``all``) is expanded.
Raises SystemExit naming an unknown extra.
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path


def requirements(pyproject: Path, extras: list[str]) -> list[str]:
    project = tomllib.loads(pyproject.read_text())["project"]
    optional = project.get("optional-dependencies", {})
    out, todo, seen = list(project["dependencies"]), list(extras), set()
    while todo:
        extra = todo.pop(0)
        if extra in seen:
            continue
        if extra not in optional:
            raise SystemExit(f"unknown extra {extra!r}; pyproject.toml has: {', '.join(sorted(optional))}")
        seen.add(extra)
        for req in optional[extra]:
            own = re.fullmatch(rf"{project['name']}\[([^\]]+)\]", req.replace(" ", ""))
            todo += own.group(1).split(",") if own else []
            if not own and req not in out:
                out.append(req)
    return out


if __name__ == "__main__":
    print("\n".join(requirements(Path("pyproject.toml"), sys.argv[1:])))

"""Users' reward files as real Python modules, and the spec's reward entries as terms.

``FILE.py:NAME`` imports FILE the way Python imports any module, so that the files people take from
TRL, open-r1 or verl run unchanged:

- a FILE in a package folder (``__init__.py`` up to some ancestor) is imported by its dotted name with
  that package's parent first on ``sys.path``: package-relative imports (``from .utils import x``,
  ``from ..import_utils import y``) and absolute ones of the package work;
- a FILE in a plain folder is a module of a package made for that folder, so ``from .helpers import f``
  reads ``helpers.py`` beside it, and the folder is first on ``sys.path``, so ``import helpers`` does too;
- NAME is any callable attribute of the module (bound by ``def``, ``class``, import or assignment).

The loading process is the reward process of one trial (workers.rewards.process), so a warm worker never
keeps the first version of an edited file and two sweeps whose files share a module name never see each
other's; modules made for plain folders are named by the file's content digest besides.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.machinery
import importlib.util
import inspect
import sys
import types
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from workers.rewards.terms import RewardError, WeightedReward, builtin_function, term_names

# import name -> the distribution that provides it, where the two differ (the hint of a missing package)
DISTRIBUTIONS = {
    "yaml": "pyyaml",
    "sklearn": "scikit-learn",
    "PIL": "pillow",
    "cv2": "opencv-python",
    "dotenv": "python-dotenv",
    "bs4": "beautifulsoup4",
    "attr": "attrs",
    "Levenshtein": "levenshtein",
    "e2b_code_interpreter": "e2b-code-interpreter",
    "async_lru": "async-lru",
    "math_verify": "math-verify",
    "latex2sympy2_extended": "latex2sympy2-extended",
    "google": "protobuf",
}
RELATIVE_IMPORT_HINT = (
    "; the file imports package-relatively (from .. import): keep it in its package folder, with the package's "
    "__init__.py files and the modules it imports, under the reward root (e.g. a checkout's trl/ or open_r1/)"
)


def missing_package_hint(e: ModuleNotFoundError) -> str:
    """`` (pip install NAME on every worker)`` for an import of a module that is not installed; '' otherwise."""
    if not e.name:
        return ""
    top = e.name.split(".")[0]
    return f" (pip install {DISTRIBUTIONS.get(top, top.replace('_', '-'))} on every Ray worker)"


def _package_of(path: Path) -> tuple[Path, list[str]]:
    """(the folder to put on sys.path, the dotted package path) of a file: the chain of folders with an
    ``__init__.py`` above it, or (its folder, []) when its folder has none."""
    root, parts = path.parent, []
    while (root / "__init__.py").is_file() and root.name.isidentifier():
        parts.insert(0, root.name)
        root = root.parent
    return (root, parts) if parts else (path.parent, [])


def shadowed(folder: Path) -> list[str]:
    """The installed packages that ``folder``'s modules (``NAME.py``, package folders) would hide once it is first on
    ``sys.path``: every import of such a name, in every reward of the trial, would get the folder's file (verl's
    ``math_verify.py`` beside a scorer hid the math-verify package: "cannot import name 'parse'")."""
    installed = [p for p in sys.path if "-packages" in p and Path(p).resolve() != folder]
    names = {f.stem for f in folder.glob("*.py")} | {d.name for d in folder.iterdir() if (d / "__init__.py").is_file()}
    return sorted(n for n in names if n.isidentifier() and importlib.machinery.PathFinder.find_spec(n, installed))


def _first_on_path(folder: Path, own: str | None = None, file: Path | None = None) -> None:
    """Put ``folder`` on sys.path (``own``: the reward file's package, which load_module checks itself): first, or
    after the installed packages when a module of the folder has an installed package's name (``shadowed``) that
    ``file`` does not import, so that the name keeps meaning the package for every reward of the trial (verl's
    reward_score folder: its ``math_verify.py`` beside a ``gsm8k.py`` that never imports it).

    Raises:
        ImportError: ``file``, or a module of the folder it imports, imports such a name (workers.rewards.imports):
            it would get one of the two in place of the other.
    """
    from workers.rewards.imports import imported_names

    shadows = [name for name in shadowed(folder) if name != own]
    hidden = sorted(set(shadows) & imported_names(file, folder)) if shadows and file is not None else shadows
    if hidden:
        raise ImportError(
            f"{', '.join(hidden)} in {folder} has the name of an installed package, and {getattr(file, 'name', 'a reward')} "
            "imports that name (itself or through a module of the folder), so which of the two it gets depends on the "
            "order of sys.path; rename the file, or put the reward files in a package folder (an __init__.py beside "
            "them) and import it package-relatively (from . import NAME)"
        )
    entry = str(folder)
    if entry in sys.path:
        sys.path.remove(entry)
    if shadows:
        sys.path.append(entry)
    else:
        sys.path.insert(0, entry)
    importlib.invalidate_caches()


def load_module(file: str | Path) -> types.ModuleType:
    """Import FILE as a module (see the module docstring for how its imports resolve).

    Raises:
        OSError: FILE cannot be read.
        Exception: whatever running FILE raises (SyntaxError, ImportError, ModuleNotFoundError, ...).
    """
    path = Path(file).resolve()
    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:12]
    root, package = _package_of(path)
    _first_on_path(root, package[0] if package else None, path)
    if package:
        top = importlib.import_module(package[0])
        where = Path(getattr(top, "__file__", None) or "").resolve().parent
        if where != root / package[0]:  # a module of that name was imported first: Python would use it
            raise ImportError(
                f"{path.name} is in package {package[0]!r}, but an installed module of that name ({where}) comes "
                "first; rename the package folder"
            )
        importlib.import_module(".".join(package))  # the package's __init__ files, as Python runs them
        if path.stem.isidentifier():
            return importlib.import_module(".".join([*package, path.stem]))
        parent = ".".join(package)
    else:  # a package of its own for the plain folder, so that `from .x import y` reads x.py beside FILE
        parent = f"_groupscale_rewards_{hashlib.sha256(str(root).encode()).hexdigest()[:12]}"
        if parent not in sys.modules:
            folder = types.ModuleType(parent)
            folder.__path__ = [str(root)]
            sys.modules[parent] = folder
    safe = "".join(c if c.isalnum() or c == "_" else "_" for c in path.stem)
    name = f"{parent}.{safe}" if path.stem.isidentifier() else f"{parent}._{safe}_{digest}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path.name} cannot be imported")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # before running it: dataclasses and pickling look the module up
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def load_function(ref: str) -> Callable[..., Any]:
    """``FILE.py:NAME`` -> the callable NAME of FILE's module.

    Raises:
        ValueError: not of the form FILE.py:NAME, or NAME is not a callable of the module (lists those it has).
        Exception: FILE cannot be read or run (load_module).
    """
    file, sep, name = ref.rpartition(":")
    if not sep or not file.endswith(".py") or not name.isidentifier():
        raise ValueError(f"reward function {ref!r} is not of the form FILE.py:NAME")
    module = load_module(file)
    fn = getattr(module, name, None)
    if not callable(fn):
        found = sorted(k for k, v in vars(module).items() if callable(v) and not k.startswith("_") and not inspect.ismodule(v))
        what = "defines no" if fn is None else f"has a {type(fn).__name__}, not a"
        raise ValueError(f"{Path(file).name} {what} callable {name!r}; its callables: {found[:20]}")
    return fn


def answer_paths(specs: Sequence[dict[str, Any]]) -> list[str]:
    """The columns (or dotted paths) the entries read answers from: a built-in's answer_column (default ``answer``),
    a function's under a named convention (its default: verl's ``reward_model.ground_truth``, OpenRLHF's ``label``,
    EasyR1's and verifiers' ``answer``), a function's under ``auto`` when given, and an OpenRLHF request's labels."""
    from workers.rewards.conventions import CONVENTIONS
    from workers.rewards.conventions.openrlhf import LABEL

    paths = []
    for spec in specs:
        given, convention = spec.get("answer_column"), spec.get("convention") or "auto"
        if spec.get("name"):
            paths.append(given or "answer")
        elif spec.get("url"):
            if spec.get("request") == "openrlhf":
                paths.append(given or LABEL)
        elif convention in CONVENTIONS and CONVENTIONS[convention].answer_column:
            paths.append(given or CONVENTIONS[convention].answer_column)
        elif given:
            paths.append(given)
    return paths


def build_terms(specs: Sequence[dict[str, Any]]) -> list[WeightedReward]:
    """Spec entries -> terms: a built-in ``{name, answer_column?, weight}``, a reward server ``{url, request?,
    timeout_s?, retries?, batch_size?, weight}`` (workers.rewards.http), or ``{function: FILE.py:NAME, kwargs?,
    convention?, answer_column?, weight}``, NAME called by its trainer's convention (workers.rewards.conventions;
    ``auto``, the default, tells them apart by signature).

    Raises:
        RewardError: a function cannot be loaded, fits no convention or does not suit the entry, or its factory fails
            (the message names it and, for a missing package, the pip command; ``index`` is the entry's position).
        ValueError: an unknown built-in name.
    """
    from workers.rewards.conventions import convention_of
    from workers.rewards.http import http_reward

    terms = []
    for i, (spec, (name, key)) in enumerate(zip(specs, term_names(specs))):
        weight = float(spec.get("weight", 1.0))
        if spec.get("url"):
            terms.append(WeightedReward(name, key, weight, http_reward(spec), "http"))
            continue
        if not spec.get("function"):
            terms.append(WeightedReward(name, key, weight, builtin_function(spec["name"], spec.get("answer_column") or "answer")))
            continue
        try:
            fn = load_function(spec["function"])
        except ModuleNotFoundError as e:
            raise RewardError(
                f"reward function {name} could not be loaded: {type(e).__name__}: {e}{missing_package_hint(e)}", i
            ) from e
        except Exception as e:  # noqa: BLE001 - user code: any failure is reported with its name
            hint = RELATIVE_IMPORT_HINT if isinstance(e, ImportError) and "relative import" in str(e) else ""
            raise RewardError(f"reward function {name} could not be loaded: {type(e).__name__}: {str(e)[:500]}{hint}", i) from e
        try:
            convention = convention_of(fn, spec, name)
            if spec.get("solution_str") == "prompt_and_response" and convention.name != "verl":
                raise RewardError(f"solution_str belongs to verl's convention; {name} takes {convention.name}'s")
            terms.append(WeightedReward(name, key, weight, convention.wrap(fn, spec, name), convention.name))
        except RewardError as e:
            raise RewardError(str(e), i) from e
    return terms

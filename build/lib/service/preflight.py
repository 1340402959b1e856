"""Checks that need the deployment (settings, cluster, files) and so cannot live in the spec model."""

from __future__ import annotations

import ast
from pathlib import Path

from service.settings import Settings
from sweeps.spec import DEFAULT_EVAL_FRACTION, DatasetTaskSpec, SweepSpec
from workers.data import DatasetError, check_rows, load_rows, read_prompt_answer_lines
from workers.rewards import math_verify_available


class SpecError(ValueError):
    """A spec the deployment cannot run. loc: field path as in pydantic errors."""

    def __init__(self, loc: tuple[str | int, ...], msg: str) -> None:
        super().__init__(msg)
        self.loc, self.msg = loc, msg


def preflight(spec: SweepSpec, settings: Settings, cluster: dict[str, float] | None) -> None:
    """Raise SpecError for the first problem found; return None when the sweep can run.

    Args:
        cluster: the Ray cluster's total resources ({"CPU": .., "GPU": ..}), or None when unknown
            (the resource checks are skipped).
    """
    if spec.n_trials > settings.max_trials:
        raise SpecError(
            ("seeds",),
            f"the sweep has {spec.n_trials} trials (G x B x seeds); this server accepts "
            f"at most {settings.max_trials} (GROUPSCALE_MAX_TRIALS)",
        )
    if spec.steps > settings.max_steps:
        raise SpecError(
            ("steps",),
            f"steps={spec.steps}; this server accepts at most {settings.max_steps} steps per trial (GROUPSCALE_MAX_STEPS)",
        )
    if cluster is not None:  # a request the cluster can never meet would leave a trial pending forever
        for field, key, low in (("cpus_per_trial", "CPU", "more than 0"), ("gpus_per_trial", "GPU", "0")):
            asked, have = getattr(spec.resources, field), cluster.get(key, 0.0)
            if asked > have:
                raise SpecError(
                    ("resources", field), f"{field}={asked:g} but the cluster has {have:g} {key}s; allowed: {low} to {have:g}"
                )
    if spec.task.name == "jsonl":
        check_under_root(spec.task.path, settings.data_root, ("task", "path"), "data", "GROUPSCALE_DATA_ROOT")
        check_task_file(spec.task.path)
    if spec.task.name == "dataset":
        check_dataset_task(spec.task, settings)
    if spec.model.path is not None:
        check_model_folder(spec.model.path, settings.model_root)


def check_under_root(path: str, root: Path | None, loc: tuple[str | int, ...], what: str, variable: str) -> Path:
    """The resolved ``path`` (links and ``..`` followed) lies under ``root`` when one is set. Returns it."""
    try:
        resolved = Path(path).expanduser().resolve()
    except (OSError, ValueError, RuntimeError):
        raise SpecError(loc, "the path cannot be resolved on the controller") from None
    if root is not None and not resolved.is_relative_to(root.expanduser().resolve()):
        raise SpecError(
            loc,
            f"{path[:200]!r} is outside the {what} root {str(root.expanduser().resolve())!r} ({variable}); "
            "allowed: paths under it",
        )
    return resolved


def check_dataset_task(task: DatasetTaskSpec, settings: Settings) -> None:
    """Data files under GROUPSCALE_DATA_ROOT and readable, the columns there, the splits non-empty;
    reward functions enabled, under GROUPSCALE_REWARD_ROOT and defining NAME (found without running the file)."""
    for i, reward in enumerate(task.rewards):
        if reward.function is not None:
            check_reward_function(reward.function, settings.reward_root, ("task", "rewards", i, "function"))
        elif reward.name == "math_verify" and not math_verify_available():
            raise SpecError(
                ("task", "rewards", i, "name"),
                "math_verify needs the math-verify package on the controller and "
                "workers (pip install 'groupscale[math]'); allowed now: "
                "exact_match, numeric_match",
            )
    answers = [r.answer_column for r in task.rewards if r.name is not None]
    sizes = {}
    for field in ("path", "eval_path"):
        path = getattr(task, field)
        if path is None:
            continue
        check_under_root(path, settings.data_root, ("task", field), "data", "GROUPSCALE_DATA_ROOT")
        try:
            rows = load_rows(path, task.split)
            check_rows(rows, task.prompt_column, answers)
        except DatasetError as e:
            loc = ("task", field) if e.field == "path" else ("task", e.field)
            raise SpecError(loc, f"{path[:200]!r}: {e}") from None
        sizes[field] = len(rows)
    if task.eval_path is None:
        n_eval = round((task.eval_fraction or DEFAULT_EVAL_FRACTION) * sizes["path"])
        if sizes["path"] < 2 or n_eval < 1 or n_eval >= sizes["path"]:
            raise SpecError(
                ("task", "eval_fraction"),
                f"the dataset has {sizes['path']} rows, so eval_fraction "
                f"{task.eval_fraction or DEFAULT_EVAL_FRACTION} leaves an empty train or "
                "held-out split; allowed: a fraction that holds out at least one row "
                "and keeps one, or eval_path",
            )


def check_reward_function(ref: str, reward_root: Path | None, loc: tuple[str | int, ...]) -> None:
    """FILE.py:NAME: user code runs only from under GROUPSCALE_REWARD_ROOT; FILE must define NAME.

    FILE is parsed (ast), not run: the controller never executes user code.
    """
    if reward_root is None:
        raise SpecError(
            loc,
            "user reward functions are disabled on this server: they run user code on the cluster. "
            "To enable them, start the server with GROUPSCALE_REWARD_ROOT set to a folder that every Ray "
            "node sees at the same path, and put FILE.py under it; allowed now: built-in rewards "
            "(name: exact_match | numeric_match | math_verify)",
        )
    file, _, name = ref.rpartition(":")
    path = check_under_root(file, reward_root, loc, "reward", "GROUPSCALE_REWARD_ROOT")
    if not _is_file(path):
        raise SpecError(loc, f"{file[:200]!r} is not a readable file on the controller")
    try:
        tree = ast.parse(path.read_bytes(), filename=path.name)
    except (SyntaxError, ValueError, OSError) as e:
        raise SpecError(
            loc, f"{path.name} does not parse as Python ({type(e).__name__} at line {getattr(e, 'lineno', '?')})"
        ) from None
    defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)}
    defined |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    if name not in defined:
        functions = sorted(n.name for n in tree.body if isinstance(n, ast.FunctionDef))
        raise SpecError(loc, f"{path.name} defines no top-level {name!r}; its functions: {functions[:20]}")


def check_task_file(task_path: str) -> None:
    """The jsonl task's file is readable here and parses as the worker will parse it (workers.tasks.jsonl),
    so that a wrong file (``/etc/passwd``) is a 422 now, not a failed trial later. Its content is not echoed."""
    path = Path(task_path).expanduser()
    if not _is_file(path):
        raise SpecError(("task", "path"), f"{task_path[:200]!r} is not a readable file on the controller")
    try:
        read_prompt_answer_lines(path)
    except (OSError, ValueError, RecursionError) as e:  # ValueError: not prompt/answer JSON lines, or not UTF-8
        reason = str(e) if not isinstance(e, UnicodeDecodeError) else "not UTF-8 text"
        raise SpecError(
            ("task", "path"),
            f"{task_path[:200]!r} is not a usable jsonl task file: {reason[:300]}; "
            'allowed: one {"prompt": str, "answer": str or number} object a line, '
            "at least 2 lines",
        ) from None


def _is_file(path: Path) -> bool:
    """is_file() that also says False for paths the OS refuses (too long, bad bytes)."""
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False


def check_model_folder(model_path: str, model_root: Path | None) -> None:
    """The folder lies under model_root (when set) and holds a config.json that transformers can load."""
    path = check_under_root(model_path, model_root, ("model", "path"), "model", "GROUPSCALE_MODEL_ROOT")
    if not _is_file(path / "config.json"):
        raise SpecError(("model", "path"), f"{model_path[:200]!r} is not a Hugging Face model folder (no config.json)")
    try:
        from transformers import AutoConfig  # only for a model folder: transformers takes a second to import

        AutoConfig.from_pretrained(path, local_files_only=True, trust_remote_code=False)
    except Exception as e:  # noqa: BLE001 - any load failure is bad input, reported in one line
        first = (str(e).splitlines() or [""])[0][:300]
        raise SpecError(("model", "path"), f"{model_path!r} has no loadable config.json ({type(e).__name__}: {first})") from None

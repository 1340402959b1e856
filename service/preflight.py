"""Checks that need the deployment (settings, cluster, files) and so cannot live in the spec model."""

from __future__ import annotations

from pathlib import Path

from transformers import AutoConfig

from service.settings import Settings
from sweeps.spec import SweepSpec
from workers.tasks.jsonl import read_problems


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
        raise SpecError(("seeds",), f"the sweep has {spec.n_trials} trials (G x B x seeds); this server accepts "
                                    f"at most {settings.max_trials} (GROUPSCALE_MAX_TRIALS)")  # fmt: skip
    if spec.steps > settings.max_steps:
        raise SpecError(("steps",), f"steps={spec.steps}; this server accepts at most {settings.max_steps} steps per trial "
                                    "(GROUPSCALE_MAX_STEPS)")  # fmt: skip
    if cluster is not None:  # a request the cluster can never meet would leave a trial pending forever
        for field, key, low in (("cpus_per_trial", "CPU", "more than 0"), ("gpus_per_trial", "GPU", "0")):
            asked, have = getattr(spec.resources, field), cluster.get(key, 0.0)
            if asked > have:
                raise SpecError(("resources", field),
                                f"{field}={asked:g} but the cluster has {have:g} {key}s; allowed: {low} to {have:g}")  # fmt: skip
    task_path = getattr(spec.task, "path", None)
    if task_path is not None:
        check_task_file(task_path)
    if spec.model.path is not None:
        check_model_folder(spec.model.path, settings.model_root)


def check_task_file(task_path: str) -> None:
    """The jsonl task's file is readable here and parses as the worker will parse it (workers.tasks.jsonl),
    so that a wrong file (``/etc/passwd``) is a 422 now, not a failed trial later. Its content is not echoed."""
    path = Path(task_path).expanduser()
    if not _is_file(path):
        raise SpecError(("task", "path"), f"{task_path[:200]!r} is not a readable file on the controller")
    try:
        read_problems(path)
    except (OSError, ValueError, RecursionError) as e:  # ValueError: not prompt/answer JSON lines, or not UTF-8
        reason = str(e) if not isinstance(e, UnicodeDecodeError) else "not UTF-8 text"
        raise SpecError(("task", "path"), f"{task_path[:200]!r} is not a usable jsonl task file: {reason[:300]}; "
                                          'allowed: one {"prompt": str, "answer": str or number} object a line, '
                                          "at least 2 lines") from None  # fmt: skip


def _is_file(path: Path) -> bool:
    """is_file() that also says False for paths the OS refuses (too long, bad bytes)."""
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False


def check_model_folder(model_path: str, model_root: Path | None) -> None:
    """The folder lies under model_root (when set) and holds a config.json that transformers can load."""
    try:
        path = Path(model_path).expanduser().resolve()
    except (OSError, ValueError, RuntimeError):
        raise SpecError(("model", "path"), "the path cannot be resolved on the controller") from None
    root = model_root.expanduser().resolve() if model_root else None
    if root is not None and not path.is_relative_to(root):
        raise SpecError(("model", "path"), f"{model_path!r} is outside the model root {str(root)!r} "
                                           "(GROUPSCALE_MODEL_ROOT); allowed: folders under it")  # fmt: skip
    if not _is_file(path / "config.json"):
        raise SpecError(("model", "path"), f"{model_path[:200]!r} is not a Hugging Face model folder (no config.json)")
    try:
        AutoConfig.from_pretrained(path, local_files_only=True, trust_remote_code=False)
    except Exception as e:  # noqa: BLE001 - any load failure is bad input, reported in one line
        first = (str(e).splitlines() or [""])[0][:300]
        raise SpecError(("model", "path"), f"{model_path!r} has no loadable config.json ({type(e).__name__}: {first})") from None

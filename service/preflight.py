"""Checks that need the deployment (settings, cluster) and so cannot live in the spec model."""

from __future__ import annotations

from pathlib import Path

from service.settings import Settings
from sweeps.spec import SweepSpec


class SpecError(ValueError):
    """A spec the deployment cannot run. loc: field path as in pydantic errors."""

    def __init__(self, loc: tuple[str | int, ...], msg: str) -> None:
        super().__init__(msg)
        self.loc, self.msg = loc, msg


def preflight(spec: SweepSpec, settings: Settings, cluster_gpus: float | None) -> None:
    """Raise SpecError for the first problem found; return None when the sweep can run.

    Args:
        cluster_gpus: GPUs in the Ray cluster, or None when unknown (check skipped).
    """
    if spec.n_trials > settings.max_trials:
        raise SpecError(
            ("seeds",),
            f"the sweep has {spec.n_trials} trials (G x B x seeds); this server accepts at "
            f"most {settings.max_trials} (GROUPSCALE_MAX_TRIALS)",
        )
    gpus = spec.resources.gpus_per_trial
    if cluster_gpus is not None and gpus > cluster_gpus:
        raise SpecError(
            ("resources", "gpus_per_trial"),
            f"gpus_per_trial={gpus} but the cluster has {cluster_gpus:g} GPUs; allowed: 0 to {cluster_gpus:g}",
        )
    task_path = getattr(spec.task, "path", None)
    if task_path is not None and not Path(task_path).expanduser().is_file():
        raise SpecError(("task", "path"), f"{task_path!r} is not a readable file on the controller")
    if spec.model.path is not None:
        path = Path(spec.model.path).expanduser().resolve()
        root = settings.model_root.expanduser().resolve() if settings.model_root else None
        if root is not None and not path.is_relative_to(root):
            raise SpecError(
                ("model", "path"),
                f"{spec.model.path!r} is outside the model root {str(root)!r} (GROUPSCALE_MODEL_ROOT); allowed: folders under it",
            )
        if not (path / "config.json").is_file():
            raise SpecError(("model", "path"), f"{spec.model.path!r} is not a Hugging Face model folder (no config.json)")

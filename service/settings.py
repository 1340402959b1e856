"""Controller settings from the environment (pydantic-settings), read once via get_settings()."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import AliasChoices, Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from service.client import bearer_token
from sweeps.storage import is_remote, join

# Ray's own default is 512 MB and 5 files for its system logs, and no rotation at all for the workers' stdout and
# stderr unless RAY_ROTATION_MAX_BYTES is set where they start (ray/_private/workers/default_worker.py, Ray 2.60).
RAY_ROTATION_MAX_BYTES = 100 * 1024 * 1024
RAY_ROTATION_BACKUP_COUNT = 5
STORAGE_SCHEMES = ("s3", "gs", "gcs", "abfs", "abfss", "hdfs", "viewfs")  # pyarrow.fs.FileSystem.from_uri's (pyarrow 25)


class Settings(BaseSettings):
    """Every field can be set as GROUPSCALE_<NAME>; the Ray and MLflow ones also by their usual names."""

    model_config = SettingsConfigDict(env_prefix="GROUPSCALE_", extra="ignore")

    data_dir: Path = Field(Path(".groupscale"), description="SQLite store, MLflow data, model cache")
    database_url: str | None = Field(None, description="SQLAlchemy URL; default SQLite under data_dir")
    storage_uri: str | None = Field(
        None,
        description="where trials keep checkpoints and the workers' resume state, reached from every node: a folder "
        "or a pyarrow file system URI (s3://bucket/prefix, gs://..., with the file system's own credentials in the "
        "environment); default data_dir (one machine, or a POSIX path every node mounts)",
    )
    mlflow_tracking_uri: str | None = Field(
        None, validation_alias=AliasChoices("MLFLOW_TRACKING_URI", "GROUPSCALE_MLFLOW_TRACKING_URI")
    )
    mlflow_backend_uri: str | None = Field(
        None, description="backend store of the MLflow server that `groupscale up` starts; default SQLite under data_dir"
    )
    ray_address: str | None = Field(None, validation_alias=AliasChoices("RAY_ADDRESS", "GROUPSCALE_RAY_ADDRESS"))
    api_token: str | None = Field(
        None, description="bearer token every /v1 endpoint but health requires when set (writes only, with public_reads)"
    )
    public_reads: bool = Field(False, description="with api_token set, the read endpoints answer without it")
    max_trials: int = Field(1000, ge=1, description="largest sweep accepted (trials)")
    max_steps: int = Field(100_000, ge=1, description="most optimizer steps T a trial may ask for")
    model_root: Path | None = Field(None, description="model.path must lie under this folder when set")
    data_root: Path | None = Field(None, description="task data files must lie under this folder when set")
    reward_root: Path | None = Field(
        None, description="user reward functions (FILE.py:NAME) run only from files under this folder; unset: refused"
    )
    reward_urls: str | None = Field(
        None,
        description="reward servers (task.rewards url:) the workers may call: comma-separated URL prefixes "
        "(http://rm-host:5000/); unset: refused",
    )
    ray_num_cpus: int | None = Field(None, ge=1, description="CPUs of the local Ray head (default: all)")
    ray_rotation_max_bytes: int = Field(
        RAY_ROTATION_MAX_BYTES,
        ge=0,
        validation_alias=AliasChoices("GROUPSCALE_RAY_ROTATION_MAX_BYTES", "RAY_ROTATION_MAX_BYTES"),
        description="a log file of the local Ray head's processes and workers is rotated at this size (bytes; 0: never)",
    )
    ray_rotation_backup_count: int = Field(
        RAY_ROTATION_BACKUP_COUNT,
        ge=0,
        validation_alias=AliasChoices("GROUPSCALE_RAY_ROTATION_BACKUP_COUNT", "RAY_ROTATION_BACKUP_COUNT"),
        description="rotated files kept of each such log (the oldest are deleted)",
    )
    poll_interval_s: float = Field(0.5, gt=0)
    trial_retries: int = Field(2, ge=0, le=10, description="Ray retries of a trial whose worker died")
    warm_workers: int | None = Field(
        None,
        ge=0,
        description="1-CPU workers started idle with the controller, so that a sweep submitted within "
        "worker_idle_s of the start starts warm (default: the local head's CPUs, at most 4; 0 on a cluster at RAY_ADDRESS)",
    )
    worker_idle_s: float = Field(300.0, ge=0, description="an idle warm worker is stopped after this long (s)")
    autoscaling: bool = Field(
        False,
        description="the cluster has an autoscaler (KubeRay, Ray's cluster launcher): a trial shape that no node of the "
        "cluster holds now is accepted and waits as demand the autoscaler sees, instead of a 422 at submit",
    )
    max_body_bytes: int = Field(1 << 20, ge=1024, description="largest request body accepted (bytes)")

    @field_validator("storage_uri")
    @classmethod
    def _storage(cls, value: str | None) -> str | None:
        """Blank: the default. A URI of a file system pyarrow takes (STORAGE_SCHEMES), or a folder, made absolute
        (every node reads the same path); anything else is a ValueError naming what is allowed."""
        if value is None or not value.strip():
            return None
        value = value.strip()
        if not is_remote(value):
            return str(Path(value.removeprefix("file://")).resolve())
        scheme, rest = value.split("://", 1)
        if not rest.partition("?")[0].strip("/"):
            raise ValueError(f"{value!r} names no bucket or host; allowed: a folder, or a URI such as s3://bucket/prefix")
        scheme = scheme.lower()
        if scheme not in STORAGE_SCHEMES:
            raise ValueError(
                f"{value!r}: {scheme}:// is not a file system groupscale can keep checkpoints in; allowed: a folder, or a "
                f"URI of {', '.join(s + '://' for s in STORAGE_SCHEMES)}"
            )
        return value

    @field_validator("api_token")
    @classmethod
    def _token(cls, value: str | None) -> str | None:
        """Stripped as the client strips it (a secret file's trailing newline); blank or unsendable: TokenError."""
        return bearer_token(value)

    @property
    def resolved_database_url(self) -> str:
        return self.database_url or f"sqlite:///{(self.data_dir / 'groupscale.db').resolve()}"

    @property
    def storage(self) -> str:
        """GROUPSCALE_STORAGE_URI, or the data dir's absolute path (a sweeps.storage location)."""
        return self.storage_uri or str(self.data_dir.resolve())

    def checkpoint_dir(self, trial_id: str) -> str:
        """The trial's checkpoint folder, a sweeps.storage location (a resume on any node reads it)."""
        return join(self.storage, "checkpoints", trial_id)

    @property
    def worker_state_dir(self) -> str:
        """Where each warm worker writes the trial it runs, a sweeps.storage location (a restart on another node
        finds it: workers.worker.TrialWorker)."""
        return join(self.storage, "workers")

    @property
    def model_cache_dir(self) -> Path:
        return (self.data_dir / "models").resolve()


@lru_cache
def get_settings() -> Settings:
    return Settings()

"""docker/: compose.yaml parses with its required variables (and names each missing one); the images
install every extra they run and pin the Python, Ray and torch versions README states."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
REQUIRED = {"RAY_AUTH_TOKEN": "t" * 32, "MLFLOW_ADMIN_PASSWORD": "p" * 24, "MLFLOW_SECRET_KEY": "k" * 32}


def _compose(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    if shutil.which("docker") is None or subprocess.run(["docker", "compose", "version"], capture_output=True).returncode:
        if os.environ.get("GROUPSCALE_REQUIRE_COMPOSE") == "1":  # CI installs it (.ci/install-compose)
            pytest.fail("docker compose is not installed (run .ci/install-compose)")
        pytest.skip("docker compose is not installed here (.ci/install-compose installs it)")
    base = {k: v for k, v in os.environ.items() if k not in REQUIRED and not k.startswith(("GROUPSCALE_", "MLFLOW_"))}
    cmd = ["docker", "compose", "-f", str(ROOT / "docker/compose.yaml"), *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=base | env, cwd=ROOT, timeout=60)


def test_compose_runs_mlflow_with_basic_auth_and_gives_every_node_the_credentials():
    r = _compose("config", "--format", "json", env=REQUIRED)
    assert r.returncode == 0, r.stderr
    services = json.loads(r.stdout)["services"]
    mlflow = services["mlflow"]
    assert mlflow["command"][-2:] == ["--app-name", "basic-auth"]
    assert mlflow["environment"]["MLFLOW_AUTH_ADMIN_PASSWORD"] == REQUIRED["MLFLOW_ADMIN_PASSWORD"]
    assert mlflow["environment"]["MLFLOW_FLASK_SERVER_SECRET_KEY"] == REQUIRED["MLFLOW_SECRET_KEY"]
    for name in ("controller", "ray-head", "ray-worker"):  # trials log from every Ray node
        env = services[name]["environment"]
        assert (env["MLFLOW_TRACKING_USERNAME"], env["MLFLOW_TRACKING_PASSWORD"]) == ("admin", REQUIRED["MLFLOW_ADMIN_PASSWORD"])
    assert [p["host_ip"] for p in mlflow["ports"]] == ["127.0.0.1"]


@pytest.mark.parametrize("missing", sorted(REQUIRED))
def test_compose_names_each_missing_secret(missing):
    r = _compose("config", "-q", env={k: v for k, v in REQUIRED.items() if k != missing})
    assert r.returncode != 0 and f"required variable {missing} is missing" in r.stderr


def test_the_multihost_override_parses_and_publishes_mlflow_on_the_cluster_address():
    env = REQUIRED | {"HEAD_IP": "10.0.0.5", "NFS_SERVER": "10.0.0.2"}
    r = _compose("-f", str(ROOT / "docker/compose.multihost.yaml"), "config", "--format", "json", env=env)
    assert r.returncode == 0, r.stderr
    mlflow = json.loads(r.stdout)["services"]["mlflow"]
    assert [p["host_ip"] for p in mlflow["ports"]] == ["10.0.0.5"] and "basic-auth" in mlflow["command"]


def test_each_image_installs_the_extras_it_runs():
    sys.path.insert(0, str(ROOT / "docker"))
    try:
        from requirements import requirements
    finally:
        sys.path.pop(0)
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    controller = requirements(ROOT / "pyproject.toml", ["server", "worker", "math", "trl"])
    worker = requirements(ROOT / "pyproject.toml", ["worker", "math", "trl"])
    assert set(controller) == {*project["dependencies"], *extras["server"], *extras["worker"], *extras["math"], *extras["trl"]}
    assert set(worker) == {*project["dependencies"], *extras["worker"], *extras["math"], *extras["trl"]}
    assert requirements(ROOT / "pyproject.toml", ["all"]) == controller  # `all` expanded, nothing twice
    assert any(r.startswith("mlflow[auth]") for r in controller)  # the basic-auth app of compose's MLflow
    for dockerfile, line in (("controller", "server worker math trl"), ("worker", "worker math trl")):
        assert (
            f"python /tmp/requirements.py {line} > /tmp/requirements.txt"
            in (ROOT / f"docker/{dockerfile}.Dockerfile").read_text()
        )


def _build_args(dockerfile: str) -> dict[str, str]:
    text = (ROOT / f"docker/{dockerfile}.Dockerfile").read_text()
    return dict(re.findall(r"^ARG (\w+)=(\S*)$", text, flags=re.M))


def test_both_images_pin_the_versions_readme_states():
    """Ray refuses a node whose Ray or Python version differs from the head's: both images take the same
    PYTHON_VERSION, RAY_VERSION and TORCH_VERSION, on a pinned python:<version>-slim base; the docker docs name
    them, and torch's is the Makefile's pin."""
    readme = (ROOT / "docs" / "operations" / "docker.md").read_text()
    stated = dict(re.findall(r"`(PYTHON_VERSION|RAY_VERSION|TORCH_VERSION)`\s+\(([\d.]+)", readme))
    assert set(stated) == {"PYTHON_VERSION", "RAY_VERSION", "TORCH_VERSION"}
    for dockerfile in ("controller", "worker"):
        args = _build_args(dockerfile)
        assert {k: args[k] for k in stated} == stated, dockerfile
        assert "FROM python:${PYTHON_VERSION}-slim" in (ROOT / f"docker/{dockerfile}.Dockerfile").read_text()
    assert f"torch=={stated['TORCH_VERSION']}" in (ROOT / "Makefile").read_text()

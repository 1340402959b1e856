"""`pip install .` without extras is a working client: --help, the offline law fit and status over HTTP.

Builds the package into a fresh virtualenv (dependencies from the package index), so it is slow.
"""

import shutil
import socket
import subprocess
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_base_install_is_a_working_client_without_torch_ray_or_mlflow(tmp_path):
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    py, cli = env_dir / "bin" / "python", env_dir / "bin" / "groupscale"
    source = tmp_path / "src"  # a copy: building in place would leave build/ and *.egg-info in the checkout
    skip = shutil.ignore_patterns(".git", ".venv", "build", "*.egg-info", ".groupscale", "__pycache__", ".*_cache")
    shutil.copytree(ROOT, source, ignore=skip)
    subprocess.run([py, "-m", "pip", "install", "-q", str(source)], check=True, timeout=900)
    installed = subprocess.run([py, "-m", "pip", "list"], capture_output=True, text=True, check=True).stdout.lower()
    for heavy in ("torch", "ray", "mlflow", "fastapi", "sqlalchemy", "transformers"):
        assert f"\n{heavy} " not in installed, f"the base install pulled {heavy}"
    help_ = subprocess.run([cli, "--help"], capture_output=True, text=True, timeout=60)
    assert help_.returncode == 0 and "recommend" in help_.stdout
    times = subprocess.run([py, "-X", "importtime", "-m", "service", "--help"], capture_output=True, text=True, timeout=60)
    imported = {line.rsplit("|", 1)[-1].strip() for line in times.stderr.splitlines()}
    assert not imported & {"torch", "ray", "scipy", "mlflow"}, sorted(imported & {"torch", "ray", "scipy", "mlflow"})
    table = tmp_path / "results.csv"
    rows = [f"{g},48,{s},{0.2 + 0.01 * g + 0.09 / (g - 1) + 0.001 * s:.6f}" for g in (2, 3, 4, 6, 8, 12, 16) for s in (0, 1)]
    table.write_text("group_size,samples_per_step,seed,gap\n" + "\n".join(rows) + "\n")
    fit = subprocess.run([cli, "law", "fit", str(table), "--y", "gap", "--json"], capture_output=True, text=True, timeout=120)
    assert fit.returncode == 0, fit.stderr
    assert '"status": "ok"' in fit.stdout and '"recommended_group_size": 4' in fit.stdout
    with socket.socket() as s:  # a free port with nothing behind it: status must say so, not crash on an import
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    status = subprocess.run([cli, "status", "--url", f"http://127.0.0.1:{port}"], capture_output=True, text=True, timeout=60)
    assert status.returncode == 1 and "cannot reach the controller" in status.stderr, status.stderr

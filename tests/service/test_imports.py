"""The controller imports no torch or transformers: only workers load the trainer."""

import subprocess
import sys

import pytest


@pytest.mark.parametrize(
    "module", ["service.main", "service.scheduler.loop", "service.scheduler.ray_backend", "workers.entry", "workers.tune_lr"]
)
def test_the_controller_side_imports_no_torch(module):
    code = f"import sys, {module}; print(','.join(m for m in ('torch', 'transformers') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "", f"importing {module} imported {out}"


@pytest.mark.parametrize("argv", [["--help"], ["law", "--help"], ["recommend", "--help"], ["spec", "from-trl", "--help"]])
def test_the_cli_s_help_imports_no_heavy_library(argv):
    """A laptop that only submits sweeps gets its --help at once: no torch, Ray, scipy, numpy or MLflow."""
    code = (
        "import sys, runpy; sys.argv = ['groupscale', *sys.argv[1:]]\n"
        "try:\n    runpy.run_module('service', run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        "heavy = ('torch', 'ray', 'scipy', 'numpy', 'mlflow', 'sqlalchemy', 'fastapi')\n"
        "print(','.join(m for m in heavy if m in sys.modules), file=sys.stderr)"
    )
    out = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, check=True)
    assert "Usage" in out.stdout and out.stderr.strip().splitlines()[-1:] in ([], [""]), out.stderr

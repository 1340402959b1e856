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

#!/usr/bin/env bash
# The prepared GPU check (README "Real-scale trials"): one command, a few minutes on one GPU, one JSON document.
# Needs a CUDA build of torch and the project's dependencies on that machine; run from the repository root:
#   bash bench/gpu_check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -c "import torch, transformers, datasets" 2>/dev/null || python3 -m pip install -q -e .
PYTHONPATH=. timeout 300 python3 -m bench.gpu_check

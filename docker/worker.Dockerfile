# syntax=docker/dockerfile:1
# groupscale GPU worker image: a Ray worker node with CUDA torch and groupscale installed.
#
# Build from the repository root (the same checkout, and the same build args, as the controller
# image: Ray imports groupscale's `workers` package on this node by name):
#   docker build -f docker/worker.Dockerfile -t groupscale-worker .
# Run on a GPU host (NVIDIA driver and NVIDIA Container Toolkit installed):
#   docker run -d --gpus all --network host --shm-size 16g -e RAY_HEAD=<head host> \
#     -v <shared data>:/data -v <shared models>:/models groupscale-worker
#
# Why python:<patch>-slim and not nvidia/cuda or pytorch/pytorch: Ray refuses a node whose Python
# differs from the head's at the patch level (3.11.13 vs 3.11.9 is refused by default), and those
# images bring their own Python. CUDA comes with the torch wheel instead (its nvidia-* pip
# packages carry the CUDA runtime, cuBLAS and cuDNN); the host only needs the NVIDIA driver.
# Keep PYTHON_VERSION and RAY_VERSION equal to those of docker/controller.Dockerfile.
ARG PYTHON_VERSION=3.11.13
FROM python:${PYTHON_VERSION}-slim

ARG RAY_VERSION=2.60.0
ARG TORCH_VERSION=2.13.0
# Empty: PyPI, whose Linux x86_64 torch wheels are CUDA builds. To match an older driver, pick a
# CUDA build from PyTorch's index, e.g. --build-arg TORCH_INDEX_URL=https://download.pytorch.org/whl/cu126
ARG TORCH_INDEX_URL=
ARG APP_UID=1000

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility

SHELL ["/bin/bash", "-o", "pipefail", "-c"]
WORKDIR /opt/groupscale

# hadolint ignore=DL3013 # versions are pinned; the index flags confuse the check
RUN index=(); if [ -n "${TORCH_INDEX_URL}" ]; then index=(--index-url "${TORCH_INDEX_URL}"); fi \
 && pip install "${index[@]}" "torch==${TORCH_VERSION}" \
 && pip install "ray[default]==${RAY_VERSION}"

# The project's dependencies (the base ones and the extras worker, math, trl) in their own layer.
COPY pyproject.toml ./
COPY docker/requirements.py /tmp/requirements.py
RUN python /tmp/requirements.py worker math trl > /tmp/requirements.txt \
 && pip install -r /tmp/requirements.txt "ray[default]==${RAY_VERSION}" "torch==${TORCH_VERSION}" \
 && rm /tmp/requirements.txt /tmp/requirements.py

COPY README.md ./
COPY service ./service
COPY workers ./workers
COPY sweeps ./sweeps
RUN pip install --no-deps . \
 && python -c "import ray, torch, workers.entry; assert ray.__version__ == '${RAY_VERSION}', ray.__version__"

COPY docker/worker-entrypoint.sh /usr/local/bin/groupscale-worker-entrypoint
RUN chmod 0755 /usr/local/bin/groupscale-worker-entrypoint \
 && useradd --uid "${APP_UID}" --create-home --shell /bin/bash groupscale \
 && mkdir -p /data /models \
 && chown groupscale:groupscale /data /models

# Trials write checkpoints and the model cache under the controller's data dir at the same absolute
# path (/data), and read model.path folders under /models: mount the shared volumes there.
ENV GROUPSCALE_DATA_DIR=/data \
    GROUPSCALE_MODEL_ROOT=/models
USER ${APP_UID}
WORKDIR /home/groupscale

# ray start --address=${RAY_HEAD}:6379 [--num-gpus=${RAY_NUM_GPUS}] --block; see the script.
ENTRYPOINT ["groupscale-worker-entrypoint"]

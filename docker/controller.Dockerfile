# syntax=docker/dockerfile:1
# groupscale controller image (CPU): the FastAPI controller, and in docker/compose.yaml also the
# MLflow server and the Ray head (all three need groupscale's dependencies; CPU trials that Ray
# places on the head import groupscale and torch).
#
# Build from the repository root:
#   docker build -f docker/controller.Dockerfile -t groupscale-controller .
#
# PYTHON_VERSION and RAY_VERSION must be the same in docker/worker.Dockerfile: Ray refuses a
# node or driver whose Ray version or Python version (major.minor.patch by default) differs from
# the head's, so both images pin the full Python patch release, not a floating 3.11 tag.
ARG PYTHON_VERSION=3.11.13
FROM python:${PYTHON_VERSION}-slim

ARG RAY_VERSION=2.60.0
ARG TORCH_VERSION=2.13.0
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
ARG APP_UID=1000

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

SHELL ["/bin/bash", "-o", "pipefail", "-c"]
WORKDIR /opt/groupscale

# CPU torch first, from the PyTorch CPU index: pyproject's torch>=2.4 alone would pull a CUDA build
# of several GB from PyPI. psycopg 3 is the driver of postgresql+psycopg:// URLs (the controller's
# store and the MLflow backend).
RUN pip install --index-url "${TORCH_INDEX_URL}" "torch==${TORCH_VERSION}" \
 && pip install "ray[default]==${RAY_VERSION}" "psycopg[binary]>=3.1"

# The project's dependencies (the base ones and the extras server, worker, math, trl) in their own layer,
# so that a source change does not reinstall them.
COPY pyproject.toml ./
COPY docker/requirements.py /tmp/requirements.py
RUN python /tmp/requirements.py server worker math trl > /tmp/requirements.txt \
 && pip install -r /tmp/requirements.txt "ray[default]==${RAY_VERSION}" "torch==${TORCH_VERSION}" \
 && rm /tmp/requirements.txt /tmp/requirements.py

COPY README.md ./
COPY service ./service
COPY workers ./workers
COPY sweeps ./sweeps
RUN pip install --no-deps . \
 && python -c "import ray, torch, service.cli, workers.entry; assert ray.__version__ == '${RAY_VERSION}', ray.__version__"

COPY docker/controller-entrypoint.sh /usr/local/bin/groupscale-entrypoint
RUN chmod 0755 /usr/local/bin/groupscale-entrypoint \
 && useradd --uid "${APP_UID}" --create-home --shell /bin/bash groupscale \
 && mkdir -p /data /models /mlflow/artifacts /mlflow/auth \
 && chown groupscale:groupscale /data /models /mlflow/artifacts /mlflow/auth

# /data: trial checkpoints and the model cache, written by the Ray workers at this same absolute
# path (mount one shared volume here on every Ray node); /models: local model folders (model.path).
ENV GROUPSCALE_DATA_DIR=/data \
    GROUPSCALE_MODEL_ROOT=/models
USER ${APP_UID}
WORKDIR /home/groupscale
EXPOSE 8000

# 200 only when the controller, Ray, MLflow and the store all answer (503 otherwise).
HEALTHCHECK --interval=30s --timeout=10s --start-period=120s --retries=3 \
  CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/v1/health', timeout=8)"]

# The entrypoint joins the Ray cluster at RAY_ADDRESS as a node without CPUs or GPUs (a Ray driver
# needs a local raylet), then runs the command. MLFLOW_TRACKING_URI, RAY_ADDRESS,
# GROUPSCALE_DATABASE_URL and GROUPSCALE_API_TOKEN come from the environment.
ENTRYPOINT ["groupscale-entrypoint"]
CMD ["groupscale", "up", "--host", "0.0.0.0", "--port", "8000", "--data-dir", "/data"]

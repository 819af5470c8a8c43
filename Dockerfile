# GPU worker image for stsreg: CUDA PyTorch base, the pinned stack, the package, a non-root user; by default it runs
# a Prefect process worker, so a GPU machine joins a work pool with one command.
# Build (needs a Docker engine and network):  docker build -t stsreg-worker .
# Worker on a GPU machine (the project clone mounted at /work; the deployments' project_dir is /work):
#   docker run --gpus all -v $PWD:/work -e PREFECT_API_URL=http://prefect-host:4200/api \
#     -e MLFLOW_TRACKING_URI=http://mlflow-host:5000 stsreg-worker
# One stage by hand:  docker run --gpus all -v $PWD:/work stsreg-worker stsreg train --stage 2
# Multi-GPU stage 2:  docker run --gpus all --ipc=host -v $PWD:/work stsreg-worker torchrun --nproc_per_node=8 -m stsreg.cli train --stage 2
ARG BASE_IMAGE=pytorch/pytorch:2.13.0-cuda12.8-cudnn9-runtime
FROM ${BASE_IMAGE}

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 \
    HF_HUB_OFFLINE=1 DO_NOT_TRACK=true MLFLOW_DISABLE_TELEMETRY=true DVC_NO_ANALYTICS=1 \
    PREFECT_SERVER_ANALYTICS_ENABLED=false STSREG_WORK_POOL=stsreg-gpu

RUN apt-get update && apt-get install -y --no-install-recommends git && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/stsreg
# The same install script that `make install` and the wheel test run (scripts/install.sh), non-editable. The base
# image already has CUDA torch 2.13.0: --keep-torch installs everything else from the lock (which pins the CPU build).
COPY pyproject.toml requirements.lock README.md ./
COPY scripts ./scripts
COPY src ./src
COPY pipelines ./pipelines
RUN python -m pip install --no-cache-dir uv==0.13.9 \
    && bash scripts/install.sh --python "$(command -v python)" --keep-torch \
    && python -c "import torch, stsreg.product.runners, stsreg.product.training; print(torch.__version__, torch.version.cuda)"

RUN useradd --create-home --uid 1000 stsreg && mkdir -p /work && chown stsreg:stsreg /work
USER stsreg
WORKDIR /work
# a process worker: flow runs execute inside this container, on its GPUs (pool created if missing); `stsreg worker`
# checks PREFECT_API_URL answers first (one line and exit 1 if not) and sends the flow-run heartbeats
CMD ["sh", "-c", "exec stsreg worker --pool \"$STSREG_WORK_POOL\""]

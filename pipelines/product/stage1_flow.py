"""Stage-1 flow: the ``Linear(3d, 1)`` head trained on NLI with the encoder frozen (one task, one MLflow run;
:mod:`pipelines.product.training_run`).

    python -m pipelines.product.stage1_flow
"""

from __future__ import annotations

import argparse
from pathlib import Path

from prefect import flow, task

from pipelines.product.training_run import EXPERIMENT, finish, logged, run_tags
from stsreg.infra import tracking
from stsreg.infra.config import load_params
from stsreg.product.runners.stage1_runner import run_stage1


@task(name="stage1")
def stage1_task(params_path: str, nli_path: str, out_dir: str, cache_dir: str, metrics_path: str | None = None) -> dict:
    params = load_params(params_path)
    with tracking.tracked_run(EXPERIMENT, "stage1", logged(params, "1"), run_tags([nli_path])) as run:
        summary = run_stage1(params, Path(nli_path), Path(out_dir), Path(cache_dir), run)
        return finish("1", run, summary, out_dir, metrics_path)


@flow(name="stsreg-stage1")
def stage1_flow(params_path: str = "params.yaml", nli_path: str = "data/prepared/nli_train.parquet",
                out_dir: str = "models/stage1", cache_dir: str = "cache/embeddings",
                metrics_path: str | None = None) -> dict:
    return stage1_task(params_path, nli_path, out_dir, cache_dir, metrics_path)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description="Run training stage 1 as a Prefect flow.")
    ap.add_argument("--params", default="params.yaml")
    print(stage1_flow(params_path=ap.parse_args().params))

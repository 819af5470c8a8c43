"""Data flow: fetch -> prepare as Prefect tasks over the same library functions the DVC stages call.

    python -m pipelines.product.data_flow                       # ephemeral Prefect (no server needed)
    PREFECT_API_URL=http://127.0.0.1:4200/api python -m pipelines.product.data_flow   # against a Prefect server

`dvc repro` stays the way to run the pipeline incrementally; this flow is what deployments schedule.
Tasks pass paths, never DataFrames, so runs stay cheap to persist and resume. Tasks log with print()
(log_prints) so that `task.fn(...)` also runs bare, outside any flow.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from prefect import flow, task

from stsreg.infra.config import load_params
from stsreg.product.data.prepare import prepare
from stsreg.product.timings import timed
from stsreg.product.data.sources import fetch_stage


@task(name="fetch", log_prints=True)
def fetch_task(params_path: str, registry: str, raw_dir: str, mirror: str | None = None) -> str:
    summary = fetch_stage(load_params(params_path), Path(params_path).resolve().parent, registry, Path(raw_dir), mirror)
    print(f"fetched {summary['files']} files from {summary['mirror']}")
    return raw_dir


@task(name="prepare", log_prints=True)
def prepare_task(params_path: str, registry: str, raw_dir: str, prepared_dir: str, rejected_dir: str,
                 metrics_path: str) -> str:
    with timed("prepare"):  # beside the outputs: a DVC output holds no clock
        metrics = prepare(Path(raw_dir), Path(prepared_dir), Path(rejected_dir), Path(metrics_path),
                          load_params(params_path), registry=Path(registry))
    print(f"prepared: {metrics['rejected_total']} rows rejected")
    return metrics_path


@flow(name="stsreg-data", log_prints=True)
def data_flow(params_path: str = "params.yaml", registry: str = "data/sources.json", mirror: str | None = None,
              raw_dir: str = "data/raw", prepared_dir: str = "data/prepared", rejected_dir: str = "data/rejected",
              metrics_path: str = "metrics/data.json") -> str:
    """Fetch and prepare; returns the path of the data metrics file."""
    raw = fetch_task(params_path, registry, raw_dir, mirror)
    return prepare_task(params_path, registry, raw, prepared_dir, rejected_dir, metrics_path)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description="Run the stsreg data flow (fetch -> prepare) with Prefect.")
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--mirror", default=None)
    a = ap.parse_args()
    print(data_flow(params_path=a.params, mirror=a.mirror))

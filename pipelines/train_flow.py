"""Training flows: stage 1 (head on NLI, encoder frozen) and stage 2 (full fine-tuning on STS).

Each flow has one task; the task opens one MLflow run (resolved params, library versions, device, git commit,
data hashes, per-step loss, dev curve, the model as artifact), calls the stage's runner in
:mod:`stsreg.runners` with the run's metric buffer, and closes the run. Ephemeral Prefect by default; a Prefect
server when ``PREFECT_API_URL`` is set. With ``metrics_path`` the task also writes the stage's headline numbers
(what ``dvc metrics show`` compares); stage 2 with ``curves_dir`` writes its STS-B dev curve and training-loss curve (DVC plots).

    python -m pipelines.train_flow --stage 1
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

import pandas as pd
from prefect import flow, task

from stsreg import atomic, runners, runtime, tracking
from stsreg.config import Params, load_params
from stsreg.hashing import sha256_file

EXPERIMENT = "stsreg"
#: The headline of each stage's training summary (``metrics/stage1.json``, ``metrics/stage2.json``).
HEADLINE = {"1": ("pairs", "steps", "final_loss", "head_rounded_accuracy"),
            "2": ("steps", "start_dev_spearman", "best_dev_spearman", "best_step", "trained_best_dev_spearman",
                  "trained_best_step")}


def _run_tags(data_paths: list[str]) -> dict[str, str]:
    tags = tracking.environment_tags(runtime.device_name())
    tags.update({f"data_sha256.{Path(p).name}": sha256_file(p) for p in data_paths})
    return tags


def _finish(stage: str, run, summary: dict, out_dir: str, metrics_path: str | None) -> dict:
    """Log the summary and the model folder to the run; write the headline metrics file."""
    run.flush()
    tracking.log_metrics(run.run_id, summary)
    tracking.client().log_artifacts(run.run_id, out_dir, artifact_path="model")
    if metrics_path:
        atomic.write_text(metrics_path, json.dumps({k: summary[k] for k in HEADLINE[stage] if k in summary}, indent=2))
    return {"run_id": run.run_id, **summary}


def _logged(params: Params, stage: str) -> dict:
    logged = {"seed": params.seed, f"stage{stage}": dataclasses.asdict(getattr(params, f"stage{stage}"))}
    if stage == "1":
        logged["model"] = dataclasses.asdict(params.model)
    return logged


def _write_curves(summary: dict, out: Path) -> None:
    """``dev_curve.csv`` (step, dev_spearman) and ``loss_curve.csv`` (step, train_loss: the mean over each window of
    ``training.stage2.LOSS_WINDOW`` steps) under ``out``: the DVC plots of the stage."""
    atomic.to_csv(pd.DataFrame(summary["dev_curve"], columns=["step", "dev_spearman"]), out / "dev_curve.csv")
    atomic.to_csv(pd.DataFrame(summary["loss_curve"], columns=["step", "train_loss"]), out / "loss_curve.csv")


@task(name="stage1")
def stage1_task(params_path: str, nli_path: str, out_dir: str, cache_dir: str, metrics_path: str | None = None) -> dict:
    params = load_params(params_path)
    with tracking.tracked_run(EXPERIMENT, "stage1", _logged(params, "1"), _run_tags([nli_path])) as run:
        summary = runners.run_stage1(params, Path(nli_path), Path(out_dir), Path(cache_dir), run)
        return _finish("1", run, summary, out_dir, metrics_path)


@task(name="stage2")
def stage2_task(params_path: str, sts_path: str, init_dir: str, out_dir: str, ckpt_dir: str,
                metrics_path: str | None = None, curves_dir: str | None = None) -> dict:
    params = load_params(params_path)
    with tracking.tracked_run(EXPERIMENT, "stage2", _logged(params, "2"), _run_tags([sts_path])) as run:
        summary = runners.run_stage2(params, Path(sts_path), Path(init_dir), Path(out_dir), Path(ckpt_dir), run)
        if curves_dir:
            _write_curves(summary, Path(curves_dir))
        return _finish("2", run, summary, out_dir, metrics_path)


@flow(name="stsreg-stage1")
def stage1_flow(params_path: str = "params.yaml", nli_path: str = "data/prepared/nli_train.parquet",
                out_dir: str = "models/stage1", cache_dir: str = "cache/embeddings", metrics_path: str | None = None) -> dict:
    return stage1_task(params_path, nli_path, out_dir, cache_dir, metrics_path)


@flow(name="stsreg-stage2")
def stage2_flow(params_path: str = "params.yaml", sts_path: str = "data/prepared/sts.parquet",
                init_dir: str = "models/stage1", out_dir: str = "models/stage2", ckpt_dir: str = "checkpoints/stage2",
                metrics_path: str | None = None, curves_dir: str | None = None) -> dict:
    return stage2_task(params_path, sts_path, init_dir, out_dir, ckpt_dir, metrics_path, curves_dir)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description="Run a stsreg training stage as a Prefect flow.")
    ap.add_argument("--stage", choices=["1", "2"], required=True)
    ap.add_argument("--params", default="params.yaml")
    a = ap.parse_args()
    print((stage1_flow if a.stage == "1" else stage2_flow)(params_path=a.params))

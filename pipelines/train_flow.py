"""Training flows: stage 1 (head on NLI, encoder frozen) and stage 2 (full fine-tuning on STS).

Each flow run creates one MLflow run (resolved params, library versions, device, git commit, data hashes,
per-step loss, dev curve, the model as artifact) and passes its id to the task; the task calls
:mod:`stsreg.stages`. Ephemeral Prefect by default; a Prefect server when ``PREFECT_API_URL`` is set.

    python -m pipelines.train_flow --stage 1
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from prefect import flow, task

from stsreg import stages, tracking
from stsreg.config import load_params

EXPERIMENT = "stsreg"


def _tracked(stage: str, params_path: str, data_paths: dict[str, str], run, out_dir: str) -> dict:
    """Run ``run(log_metric)`` inside one MLflow run; always closes the run, FAILED on error."""
    params = load_params(params_path)
    section = getattr(params, f"stage{stage}")
    logged = {"seed": params.seed, f"stage{stage}": dataclasses.asdict(section)}
    if stage == "1":
        logged["model"] = dataclasses.asdict(params.model)
    tags = tracking.environment_tags(stages.device_name())
    tags.update({f"data_sha256.{Path(p).name}": tracking.file_hash(p) for p in data_paths.values()})
    with tracking.tracked_run(EXPERIMENT, f"stage{stage}", logged, tags) as buffer:
        summary = run(params, buffer)
        buffer.flush()
        tracking.log_metrics(buffer.run_id, summary)
        tracking.client().log_artifacts(buffer.run_id, out_dir, artifact_path="model")
    return {"run_id": buffer.run_id, **summary}


@task(name="stage1")
def stage1_task(params_path: str, nli_path: str, out_dir: str, cache_dir: str) -> dict:
    return _tracked("1", params_path, {"nli": nli_path},
                    lambda params, log: stages.run_stage1(params, Path(nli_path), Path(out_dir), Path(cache_dir), log), out_dir)


@task(name="stage2")
def stage2_task(params_path: str, sts_path: str, init_dir: str, out_dir: str, ckpt_dir: str) -> dict:
    return _tracked("2", params_path, {"sts": sts_path},
                    lambda params, log: stages.run_stage2(params, Path(sts_path), Path(init_dir), Path(out_dir), Path(ckpt_dir), log),
                    out_dir)


@flow(name="stsreg-stage1")
def stage1_flow(params_path: str = "params.yaml", nli_path: str = "data/prepared/nli_train.parquet",
                out_dir: str = "models/stage1", cache_dir: str = "cache/embeddings") -> dict:
    return stage1_task(params_path, nli_path, out_dir, cache_dir)


@flow(name="stsreg-stage2")
def stage2_flow(params_path: str = "params.yaml", sts_path: str = "data/prepared/sts.parquet",
                init_dir: str = "models/stage1", out_dir: str = "models/stage2", ckpt_dir: str = "checkpoints/stage2") -> dict:
    return stage2_task(params_path, sts_path, init_dir, out_dir, ckpt_dir)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description="Run a stsreg training stage as a Prefect flow.")
    ap.add_argument("--stage", choices=["1", "2"], required=True)
    ap.add_argument("--params", default="params.yaml")
    a = ap.parse_args()
    print((stage1_flow if a.stage == "1" else stage2_flow)(params_path=a.params))

"""What the two training flows share: the MLflow run's name, tags and params, and how a finished stage is logged.

Each training flow (:mod:`pipelines.product.stage1_flow`, :mod:`pipelines.product.stage2_flow`) has one task; the task
opens one MLflow run (resolved params, library versions, device, git commit, data hashes, per-step loss, dev curve, the
model as artifact), calls the stage's runner (:mod:`stsreg.product.runners`) with the run's metric buffer, and closes
the run. Ephemeral Prefect by default; a Prefect server when ``PREFECT_API_URL`` is set. With ``metrics_path`` the task
also writes the stage's headline numbers (what ``dvc metrics show`` compares).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from stsreg.infra import atomic, runtime, tracking
from stsreg.infra.config import Params
from stsreg.infra.hashing import sha256_file

EXPERIMENT = "stsreg"
#: The headline of each stage's training summary (``metrics/stage1.json``, ``metrics/stage2.json``).
HEADLINE = {"1": ("pairs", "steps", "final_loss", "head_rounded_accuracy"),
            "2": ("steps", "start_dev_spearman", "best_dev_spearman", "best_step", "trained_best_dev_spearman",
                  "trained_best_step")}


def run_tags(data_paths: list[str]) -> dict[str, str]:
    """The environment tags (:func:`stsreg.infra.tracking.environment_tags`), the sha256 of each data file, and
    ``data.raw_files_changed`` when the tables were prepared from locally edited raw files
    (``prepare.allow_local_edits``; read from the data summary beside them)."""
    tags = tracking.environment_tags(runtime.device_name())
    tags.update({f"data_sha256.{Path(p).name}": sha256_file(p) for p in data_paths})
    for folder in {Path(p).parent for p in data_paths}:
        summary = folder / "summary.json"
        changed = (
            json.loads(summary.read_text(encoding="utf-8")).get("raw_files_changed") if summary.is_file() else None
        )
        if changed:
            tags["data.raw_files_changed"] = "; ".join(changed)[:5000]  # MLflow caps a tag value
    return tags


def finish(stage: str, run, summary: dict, out_dir: str, metrics_path: str | None) -> dict:
    """Log the summary and the model folder to the run; write the headline metrics file."""
    run.flush()
    tracking.log_metrics(run.run_id, summary)
    used = summary.get("precision") or summary.get("encoder", {}).get("precision")  # stage 1: its encoder step's
    if used:
        tracking.client().set_tag(run.run_id, "precision", used)
    tracking.client().log_artifacts(run.run_id, out_dir, artifact_path="model")
    if metrics_path:
        atomic.write_text(metrics_path, json.dumps({k: summary[k] for k in HEADLINE[stage] if k in summary}, indent=2))
    return {"run_id": run.run_id, **summary}


def logged(params: Params, stage: str) -> dict:
    """The params a stage's run logs: the seed and the stage's section (stage 1 also the model section)."""
    logged = {"seed": params.seed, f"stage{stage}": dataclasses.asdict(getattr(params, f"stage{stage}"))}
    if stage == "1":
        logged["model"] = dataclasses.asdict(params.model)
    return logged

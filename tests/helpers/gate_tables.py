"""Registered versions whose runs hold a prediction table (what the promotion gate reads), on any MLflow store."""

from __future__ import annotations

import numpy as np
import pandas as pd


def predictions(rng, noise: dict[str, float], gold: dict[str, np.ndarray]) -> pd.DataFrame:
    """A prediction table (eval/predictions.parquet's columns) whose cosine is each task's gold + noise of that
    task's size: less noise, higher Spearman."""
    parts = []
    for task, y in gold.items():
        n = len(y)
        parts.append(pd.DataFrame({"task": task, "sentence1": [f"{task} a {i}" for i in range(n)],
                                   "sentence2": [f"{task} b {i}" for i in range(n)], "score": y,
                                   "cosine": y + rng.normal(0, noise[task], n), "seen_in_train": False}))
    return pd.concat(parts, ignore_index=True)


def registered_version(c, name: str, table: pd.DataFrame, tmp) -> str:
    """A registered version whose run holds ``table`` as eval/predictions.parquet (what the gate reads)."""
    from mlflow.exceptions import MlflowException

    # an embedded store: artifacts under tmp, never ./mlruns of the cwd; a server: its own (mlflow-artifacts:/)
    location = None if c.tracking_uri.startswith("http") else (tmp / "artifacts").as_uri()
    experiment = c.get_experiment_by_name("gate") or c.get_experiment(
        c.create_experiment("gate", artifact_location=location))
    run = c.create_run(experiment.experiment_id)
    path = tmp / run.info.run_id / "predictions.parquet"
    path.parent.mkdir()
    table.to_parquet(path)
    c.log_artifact(run.info.run_id, str(path), artifact_path="eval")
    try:
        c.create_registered_model(name)
    except MlflowException:  # the second version: the model exists
        pass
    return c.create_model_version(name, source=f"runs:/{run.info.run_id}/model", run_id=run.info.run_id).version

"""The evaluation runner: a model folder or a backbone -> ``reports/eval/`` (7 tasks, intervals, predictions)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pandas as pd

from stsreg.infra import atomic, public_tables, runtime
from stsreg.product import precision
from stsreg.infra.config import Params
from stsreg.product.data.catalogue import EVAL_TASKS
from stsreg.product.sts_eval import PRIMARY_METRIC, eval_pairs, format_table, intervals, score_pairs, task_metrics
from stsreg.product.model import SiameseRegressor


def load_for_eval(model_dir: Path, max_length: int, pooling: str = "mean", precision: str = "auto") -> SiameseRegressor:
    """A saved model folder, or a backbone name/path with ``pooling`` (the untouched base model; untrained head),
    encoding at the protocol's ``max_length`` and ``precision`` (every model is scored alike)."""
    if (Path(model_dir) / "stsreg_model.json").exists():
        model = SiameseRegressor.load(model_dir, precision=precision)
    else:
        model = SiameseRegressor.from_pretrained(str(model_dir), pooling=pooling, precision=precision)
    model.config = dataclasses.replace(model.config, max_length=max_length)
    model.token_cache = runtime.cache_dir("tokens")
    return model.to(runtime.resolve_device()).eval()


#: ``metrics/eval.json``: the primary metric, its leakage-free view, STS-B dev, each task, the served score's error.
HEADLINE = (PRIMARY_METRIC, "avg7_unseen_spearman", public_tables.DEV_METRIC, *(f"{t}_spearman" for t in EVAL_TASKS),
            "avg7_prediction_mae")


def headline(metrics: dict) -> dict:
    """The :data:`HEADLINE` keys of a full metrics dict (absent ones skipped)."""
    return {k: metrics[k] for k in HEADLINE if k in metrics}


def run_evaluate(params: Params, model_dir: Path, sts_path: Path, out_dir: Path) -> dict:
    """7-task evaluation of ``model_dir`` -> ``out_dir``/{metrics.json, predictions.parquet, table.md}; returns
    metrics."""
    p = params.evaluate
    runtime.set_seed(params.seed)
    model = load_for_eval(model_dir, p.max_length, params.model.pooling, params.model.precision)
    scored = score_pairs(model, eval_pairs(pd.read_parquet(sts_path)), p.batch_size)
    metrics = task_metrics(scored)
    metrics.update(intervals(scored, p.n_resamples, params.seed, p.confidence))
    metrics["precision"] = precision.describe(model.amp_dtype)  # what the encoder ran in
    # the pair's text is kept: the promotion gate matches two models' predictions by content, not by file and line
    keep = ["task", "dataset", "subset", "file", "line", "sentence1", "sentence2", "score", "seen_in_train", "cosine",
            "prediction"]
    atomic.to_parquet(scored[keep], out_dir / "predictions.parquet")
    atomic.write_text(out_dir / "table.md", format_table(metrics) + "\n")
    # last: the stage's marker
    atomic.write_text(out_dir / "metrics.json", json.dumps(metrics, indent=2, sort_keys=True))
    return metrics

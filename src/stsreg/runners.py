"""One runner per training / evaluation stage: read the stage's inputs, seed, build what it needs, call the pure
function that does the work, write the outputs. Shared by the CLI (bare and under torchrun), the Prefect flows,
the comparison and the search, so every entry point runs the same code.

``log_metric(key, value, step)`` receives metrics (an MLflow :class:`~stsreg.tracking.MetricBuffer` in flows).

    run_stage1    data/prepared/nli_train.parquet -> models/stage1     (training.stage1.train_head)
    run_stage2    models/stage1 + data/prepared/sts.parquet -> models/stage2   (training.stage2.fine_tune)
    run_evaluate  a model folder or backbone -> reports/eval/          (evaluate.score_pairs, evaluate.task_metrics)
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pandas as pd

from stsreg import atomic, runtime
from stsreg.config import Params
from stsreg.data.catalogue import EVAL_TASKS, sample_pairs, sts_training_pairs, stsb_split
from stsreg.evaluate import PRIMARY_METRIC, eval_pairs, format_table, intervals, score_pairs, task_metrics
from stsreg.objective import Objective
from stsreg.model import SiameseRegressor
from stsreg.training.stage1 import train_head
from stsreg.training.stage2 import fine_tune

NOOP = lambda key, value, step: None  # noqa: E731


def run_stage1(params: Params, nli_path: Path, out_dir: Path, cache_dir: Path, log_metric=NOOP) -> dict:
    """NLI training table -> ``out_dir`` (frozen encoder + trained head, ``training_summary.json``)."""
    runtime.set_seed(params.seed)
    model = SiameseRegressor.from_params(params.model)
    summary = train_head(model, pd.read_parquet(nli_path), params.stage1, params.seed, cache_dir, log_metric)
    with atomic.staged_dir(out_dir) as staged:  # a reader never sees a half-saved model
        model.save(staged)
        (staged / "training_summary.json").write_text(json.dumps(summary, indent=2))
    return summary


def stage2_data(sts_path: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(train, dev): STS-B train + SICK-R train on their raw scales, and STS-B dev.

    Test rows are never read (a parquet filter keeps them out of memory): training and every choice made on
    its dev curve (checkpoint selection, the search) cannot see a test label."""
    sts = pd.read_parquet(sts_path, filters=[("split", "in", ["train", "dev"])])
    return sts_training_pairs(sts), stsb_split(sts, "dev")


def run_stage2(params: Params, sts_path: Path, init: Path | SiameseRegressor, out_dir: Path, ckpt_dir: Path,
               log_metric=NOOP, keep: str | None = None, on_eval=None) -> dict:
    """A starting model (a saved folder, by default ``models/stage1``, or a model object) + STS tables ->
    ``out_dir`` (the STS-B dev selection ``keep``, default ``stage2.keep``), ``stage2.max_train_pairs`` applied.
    ``on_eval(step, dev_spearman)``: see :class:`stsreg.training.selection.DevSelector`."""
    device = runtime.resolve_device()
    runtime.init_distributed(device)
    model = init if isinstance(init, SiameseRegressor) else SiameseRegressor.load(init)
    runtime.set_seed(params.seed)
    train, dev = stage2_data(sts_path)
    p = params.stage2
    train = sample_pairs(train, p.max_train_pairs, params.seed)
    return fine_tune(model, train, dev, Objective.from_params(p), p, params.seed, out_dir, ckpt_dir, device, log_metric,
                     keep=keep, on_eval=on_eval)


def load_for_eval(model_dir: Path, max_length: int, pooling: str = "mean", precision: str = "auto") -> SiameseRegressor:
    """A saved model folder, or a backbone name/path with ``pooling`` (the untouched base model; untrained head),
    encoding at the protocol's ``max_length`` and ``precision`` (every model is scored alike)."""
    if (Path(model_dir) / "stsreg_model.json").exists():
        model = SiameseRegressor.load(model_dir)
    else:
        model = SiameseRegressor.from_pretrained(str(model_dir), pooling=pooling)
    model.config = dataclasses.replace(model.config, max_length=max_length, precision=precision)
    return model.to(runtime.resolve_device()).eval()


#: ``metrics/eval.json``: the primary metric, its leakage-free view, STS-B dev, each task, the served score's error.
HEADLINE = (PRIMARY_METRIC, "avg7_unseen_spearman", "stsb_dev_spearman", *(f"{t}_spearman" for t in EVAL_TASKS),
            "avg7_prediction_mae")


def headline(metrics: dict) -> dict:
    """The :data:`HEADLINE` keys of a full metrics dict (absent ones skipped)."""
    return {k: metrics[k] for k in HEADLINE if k in metrics}


def run_evaluate(params: Params, model_dir: Path, sts_path: Path, out_dir: Path) -> dict:
    """7-task evaluation of ``model_dir`` -> ``out_dir``/{metrics.json, predictions.parquet, table.md}; returns metrics."""
    p = params.evaluate
    runtime.set_seed(params.seed)
    model = load_for_eval(model_dir, p.max_length, params.model.pooling, params.model.precision)
    scored = score_pairs(model, eval_pairs(pd.read_parquet(sts_path)), p.batch_size)
    metrics = task_metrics(scored)
    metrics.update(intervals(scored, p.n_resamples, params.seed, p.confidence))
    keep = ["task", "dataset", "subset", "file", "line", "score", "seen_in_train", "cosine", "prediction"]
    atomic.to_parquet(scored[keep], out_dir / "predictions.parquet")
    atomic.write_text(out_dir / "table.md", format_table(metrics) + "\n")
    atomic.write_text(out_dir / "metrics.json", json.dumps(metrics, indent=2, sort_keys=True))  # last: the stage's marker
    return metrics

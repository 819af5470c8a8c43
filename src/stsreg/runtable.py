"""Tables over folders of (row, seed) runs, shared by the comparison and the NLI table.

Each run folder ``<runs_dir>/<row>-<seed>/`` holds ``metrics.json`` (:func:`stsreg.evaluate.task_metrics` plus
intervals), ``predictions.parquet`` (one row per test pair) and, for trained rows, ``training_summary.json``.
Spearman figures are x100.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from stsreg.data.catalogue import EVAL_TASKS
from stsreg.evaluate import paired_on_predictions

#: The figures of each row: the 7 tasks, their mean and its leakage-free (unseen) view.
COLUMNS = [*EVAL_TASKS, "avg7", "avg7_unseen"]


def collect(runs_dir: Path, methods, seeds) -> pd.DataFrame:
    """One row per (method, seed) with the metrics of ``<runs_dir>/<method>-<seed>/metrics.json``."""
    rows = []
    for method in methods:
        for seed in seeds:
            run = runs_dir / f"{method}-{seed}"
            m = json.loads((run / "metrics.json").read_text())
            trained = {}
            if (run / "training_summary.json").exists():  # the base row trains nothing
                s = json.loads((run / "training_summary.json").read_text())
                trained = {"dev_start": s["start_dev_spearman"], "dev_kept": s["trained_best_dev_spearman"],
                           "kept_step": s["trained_best_step"], "total_steps": s["total_steps"]}
            rows.append({"method": method, "seed": seed, **m, **trained})
    return pd.DataFrame(rows)


def results_table(runs: pd.DataFrame) -> pd.DataFrame:
    """(method) x (task mean, std, CI low/high averaged over seeds): the CSV behind the markdown table."""
    out = []
    for method, g in runs.groupby("method", sort=False):
        row = {"method": method, "seeds": len(g)}
        for col in COLUMNS:
            key = "avg7_unseen_spearman" if col == "avg7_unseen" else f"{col}_spearman"
            row[f"{col}_mean"] = g[key].mean()
            row[f"{col}_std"] = g[key].std(ddof=1) if len(g) > 1 else 0.0
            row[f"{col}_low"] = g[f"{key}_low"].mean()
            row[f"{col}_high"] = g[f"{key}_high"].mean()
        for col in ("dev_start", "dev_kept", "kept_step", "total_steps"):
            row[col] = g[col].mean() if col in g and g[col].notna().any() else np.nan
        out.append(row)
    return pd.DataFrame(out)


def paired_tests(runs_dir: Path, pairs, seeds, n_resamples: int, seed: int = 0) -> pd.DataFrame:
    """Each (a, b) of ``pairs``, per seed, on the same test pairs: a - b in avg7 and avg7-unseen, one-sided p that
    a is better."""
    rows = []
    for reference, other in pairs:
        for s in seeds:
            a = pd.read_parquet(runs_dir / f"{reference}-{s}" / "predictions.parquet")
            b = pd.read_parquet(runs_dir / f"{other}-{s}" / "predictions.parquet")
            for view, unseen in (("avg7", False), ("avg7_unseen", True)):
                r = paired_on_predictions(a, b, unseen, n_resamples, seed)
                rows.append({"reference": reference, "other": other, "seed": s, "view": view, **r.as_dict()})
    return pd.DataFrame(rows)

"""NLI-table flow: every objective of :mod:`stsreg.experiments.nli_table` x every seed, then the table, paired tests and
plot.

One MLflow run per (objective, seed) in experiment ``stsreg-nli-table`` (the params, per-step loss, the 7-task
metrics, predictions) and one ``nli-table`` run with the report. A finished (objective, seed) keeps its results in
``<out_dir>/rows/`` (:mod:`stsreg.experiments.row_results`, in git) and is skipped on a rerun while its settings,
data and code are unchanged; a run killed mid-training resumes from its checkpoint in ``runs_dir``.

    stsreg nli-table                    # or: dvc repro nli_table / make nli-table
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path

import pandas as pd
from prefect import flow, task

from pipelines.experiments.experiment_rows import Report, Row, Table, run_row
from stsreg.experiments import nli_table, row_results
from stsreg.infra.codehash import RowKey
from stsreg.infra.config import Params, load_params
from stsreg.infra.hashing import sha256_file
from stsreg.product.precision import cache_name
from stsreg.product.runners.eval_runner import run_evaluate

EXPERIMENT = "stsreg-nli-table"
#: The code one (objective, seed) run executes (the settings modules are in no key: the resolved values are,
#: codehash.KEYLESS).
ROW_CODE = ("stsreg.experiments.nli_table", "stsreg.product.runners.eval_runner")


def row_key(params: Params, name: str, seed: int, nli_sha: str, sts_sha: str) -> RowKey:
    """Settings, seed, data and code of one row: a rerun reuses a finished row only if all are unchanged."""
    parts = {"objective": name, "kind": nli_table.KINDS[name], "seed": seed, "model": dataclasses.asdict(params.model),
             "precision": cache_name(params.model.precision),
             "evaluate": dataclasses.asdict(params.evaluate), "sts": sts_sha}
    if nli_table.KINDS[name] is not None:
        parts.update(nli_table=dataclasses.asdict(params.nli_table), nli=nli_sha)
    return RowKey(parts, ROW_CODE)


@task(name="nli-table-row", task_run_name="{name}-{seed}")
def nli_table_row(params_path: str, name: str, seed: int, nli_path: str, sts_path: str, runs_dir: str,
                  out_dir: str) -> dict:
    params = dataclasses.replace(load_params(params_path), seed=seed)
    key = row_key(params, name, seed, sha256_file(nli_path), sha256_file(sts_path))
    logged = {"objective": name, "seed": seed, "nli_table": dataclasses.asdict(params.nli_table),
              "model": dataclasses.asdict(params.model), "evaluate": dataclasses.asdict(params.evaluate)}
    row = Row(f"{name}-{seed}", key, EXPERIMENT, logged, {"objective": name, "seed": str(seed)},
                   Path(runs_dir) / f"{name}-{seed}", row_results.folder(out_dir),
                   ("table.md", "predictions.parquet", "nli_summary.json"))

    def train_and_score(run) -> dict:
        started = time.time()
        model_dir = nli_table.run_row(params, name, seed, pd.read_parquet(nli_path), row.work, run)
        trained_s = time.time() - started
        run.flush()
        metrics = run_evaluate(params, model_dir, Path(sts_path), row.work)
        return {**metrics, "train_seconds": trained_s, "row_seconds": time.time() - started}

    return run_row(row, train_and_score)


@task(name="nli-table-report")
def nli_table_report(params_path: str, out_dir: str, metrics_path: str) -> dict:
    params = load_params(params_path)
    p = params.nli_table
    ref = nli_table.REFERENCE
    pairs = lambda table: [(ref, o) for o in p.objectives if o != ref] if ref in p.objectives else []  # noqa: E731
    runs, table, tests = Table(Path(out_dir), p.objectives, p.seeds, pairs, params.evaluate.n_resamples,
                                    params.seed).build()
    seconds = runs.groupby("method", sort=False).row_seconds.mean()
    md = nli_table.format_table(table, tests, p.seeds, seconds.to_dict(), params.model.backbone)
    # the headline: avg7 per objective (no row trains on STS, so the unseen view is in results.csv, not here)
    summary = {f"{r.method}_avg7": float(r["avg7_mean"]) for _, r in table.iterrows()}
    logged = {"nli_table": dataclasses.asdict(p), "model": dataclasses.asdict(params.model)}
    return Report(md, summary, metrics_path, EXPERIMENT, "nli-table", logged, "nli_table").publish(Path(out_dir))


@flow(name="stsreg-nli-table")
def nli_table_flow(params_path: str = "params.yaml", nli_path: str = "data/prepared/nli_train.parquet",
                   sts_path: str = "data/prepared/sts.parquet", runs_dir: str = "reports/nli_table/runs",
                   out_dir: str = "reports/nli_table", metrics_path: str = "metrics/nli_table.json") -> dict:
    p = load_params(params_path).nli_table
    for seed in p.seeds:
        for name in p.objectives:
            nli_table_row(params_path, name, int(seed), nli_path, sts_path, runs_dir, out_dir)
    return nli_table_report(params_path, out_dir, metrics_path)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description="Run the NLI-only objective table as a Prefect flow.")
    ap.add_argument("--params", default="params.yaml")
    print(nli_table_flow(params_path=ap.parse_args().params))

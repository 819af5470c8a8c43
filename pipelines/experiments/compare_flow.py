"""Comparison flow: every method of :mod:`stsreg.experiments.compare` x every seed, then the results table, paired tests
and plot.

One MLflow run per (method, seed) (tags ``method``, ``seed``; the 7-task metrics, the dev curve, predictions)
and one ``compare`` run with the table, the tests and the plot. Each finished (method, seed) keeps its results in
``<out_dir>/rows/`` (:mod:`stsreg.experiments.row_results`, in git) and is skipped on a rerun while its settings,
data and code are unchanged, so an interrupted comparison resumes and a fresh clone trains only the rows it lacks;
``runs_dir`` holds the heavy work (stage-1 models, weights while they train).

    stsreg compare                      # or: dvc repro compare / make compare
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import pandas as pd
from prefect import flow, task

from pipelines.experiments.experiment_rows import Report, Row, Table, run_row
from stsreg.infra import atomic
from stsreg.experiments import compare, row_results, run_tables
from stsreg.infra.config import load_params
from stsreg.infra.hashing import sha256_file
from stsreg.product.runners.eval_runner import run_evaluate

EXPERIMENT = "stsreg-compare"


@task(name="compare-run", task_run_name="{method}-{seed}")
def compare_run(params_path: str, method: str, seed: int, sts_path: str, nli_path: str, runs_dir: str,
                out_dir: str) -> dict:
    params = dataclasses.replace(load_params(params_path), seed=seed)
    name = f"{method}-{seed}"
    key = compare.run_key(params, method, seed, sha256_file(sts_path), sha256_file(nli_path))
    logged = {"method": method, "seed": seed, "spec": compare.METHODS[method],
              "stage2": dataclasses.asdict(params.stage2), "evaluate": dataclasses.asdict(params.evaluate)}
    row = Row(name, key, EXPERIMENT, logged, {"method": method, "seed": str(seed)}, Path(runs_dir) / name,
                   row_results.folder(out_dir))

    def train_and_score(run) -> dict:
        model_dir = compare.train_method(params, method, Path(sts_path), Path(nli_path), row.work, run)
        run.flush()
        return run_evaluate(params, model_dir, Path(sts_path), row.work)

    return run_row(row, train_and_score)


@task(name="compare-report")
def compare_report(params_path: str, out_dir: str, metrics_path: str) -> dict:
    params = load_params(params_path)
    c = params.compare
    pairs = lambda table: compare.test_pairs(compare.reference_method(table), c.methods)  # noqa: E731
    out = Path(out_dir)
    _, table, tests = Table(out, c.methods, c.seeds, pairs, params.evaluate.n_resamples, params.seed).build()
    # long format for `dvc plots`: one row per (method, view)
    long = [{"method": r.method, "view": v, "spearman": r[f"{v}_mean"]} for _, r in table.iterrows()
            for v in ("avg7", "avg7_unseen")]
    atomic.to_csv(pd.DataFrame(long), out / "plot.csv")
    summary = {f"{r.method}_{col}": float(r[f"{col}_mean"]) for _, r in table.iterrows()
               for col in ("avg7", "avg7_unseen")}
    md = run_tables.format_compare(table, tests, c.seeds, compare.budget(params))
    logged = {"compare": dataclasses.asdict(c), "stage2": dataclasses.asdict(params.stage2)}
    return Report(md, summary, metrics_path, EXPERIMENT, "compare", logged).publish(out)


@flow(name="stsreg-compare")
def compare_flow(params_path: str = "params.yaml", sts_path: str = "data/prepared/sts.parquet",
                 nli_path: str = "data/prepared/nli_train.parquet", runs_dir: str = "reports/compare/runs",
                 out_dir: str = "reports/compare", metrics_path: str = "metrics/compare.json") -> dict:
    c = load_params(params_path).compare
    for seed in c.seeds:
        for method in c.methods:
            compare_run(params_path, method, int(seed), sts_path, nli_path, runs_dir, out_dir)
    return compare_report(params_path, out_dir, metrics_path)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description="Run the method comparison as a Prefect flow.")
    ap.add_argument("--params", default="params.yaml")
    print(compare_flow(params_path=ap.parse_args().params))

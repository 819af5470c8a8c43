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
import json
import shutil
from pathlib import Path

import pandas as pd
from prefect import flow, task

from stsreg.infra import atomic, runtime, tracking
from stsreg.experiments import compare, row_results, run_tables
from stsreg.infra.config import load_params
from stsreg.infra.hashing import sha256_file
from stsreg.product.runners.eval_runner import run_evaluate

EXPERIMENT = "stsreg-compare"


@task(name="compare-run", task_run_name="{method}-{seed}")
def compare_run(params_path: str, method: str, seed: int, sts_path: str, nli_path: str, runs_dir: str,
                out_dir: str) -> dict:
    params = dataclasses.replace(load_params(params_path), seed=seed)
    row, rows = f"{method}-{seed}", row_results.folder(out_dir)
    work = Path(runs_dir) / row
    key = compare.run_key(params, method, seed, sha256_file(sts_path), sha256_file(nli_path))
    if row_results.is_done(rows, row, key.fingerprint):
        return row_results.metrics(rows, row)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    logged = {"method": method, "seed": seed, "spec": compare.METHODS[method],
              "stage2": dataclasses.asdict(params.stage2),
              "evaluate": dataclasses.asdict(params.evaluate)}
    tags = {**tracking.environment_tags(runtime.device_name()), "method": method, "seed": str(seed),
            "fingerprint": key.fingerprint}
    with tracking.tracked_run(EXPERIMENT, f"{method}-{seed}", logged, tags) as run:
        model_dir = compare.train_method(params, method, Path(sts_path), Path(nli_path), work, run)
        run.flush()
        metrics = run_evaluate(params, model_dir, Path(sts_path), work)
        tracking.log_metrics(run.run_id, metrics)
        for name in ("table.md", "predictions.parquet"):
            tracking.client().log_artifact(run.run_id, str(work / name), artifact_path="eval")
    # the weights are not kept: the results travel in rows/ (the marker a rerun trusts written last), the work goes
    row_results.keep(work, rows, row, key, run.run_id)
    shutil.rmtree(work, ignore_errors=True)
    return metrics


@task(name="compare-report")
def compare_report(params_path: str, out_dir: str, metrics_path: str) -> dict:
    params = load_params(params_path)
    c = params.compare
    rows = row_results.folder(out_dir)
    runs = run_tables.collect(rows, c.methods, c.seeds)
    table = run_tables.results_table(runs)
    reference = compare.reference_method(table)
    pairs = compare.test_pairs(reference, c.methods)
    tests = run_tables.paired_tests(rows, pairs, c.seeds, params.evaluate.n_resamples, params.seed) if pairs else None
    row_results.prune(rows)
    out = Path(out_dir)
    atomic.to_csv(runs, out / "runs.csv")
    atomic.to_csv(table, out / "results.csv")
    md = run_tables.format_compare(table, tests, c.seeds, compare.budget(params))
    atomic.write_text(out / "results.md", md + "\n")
    if tests is not None:
        atomic.to_csv(tests, out / "paired.csv")
    # long format for `dvc plots`: one row per (method, view)
    long = [{"method": r.method, "view": v, "spearman": r[f"{v}_mean"]} for _, r in table.iterrows()
            for v in ("avg7", "avg7_unseen")]
    atomic.to_csv(pd.DataFrame(long), out / "plot.csv")
    run_tables.plot_methods(table, out / "avg7.png")
    summary = {f"{r.method}_{col}": float(r[f"{col}_mean"]) for _, r in table.iterrows()
               for col in ("avg7", "avg7_unseen")}
    atomic.write_text(metrics_path, json.dumps(summary, indent=2))  # last
    logged = {"compare": dataclasses.asdict(c), "stage2": dataclasses.asdict(params.stage2)}
    with tracking.tracked_run(EXPERIMENT, "compare", logged, tracking.environment_tags(runtime.device_name())) as run:
        tracking.log_report(run.run_id, summary, out, ("results.md", "results.csv", "runs.csv", "paired.csv",
                                                       "avg7.png"),
                            "compare")
    print(md)
    return summary


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

"""Baselines flow: every system of :mod:`stsreg.experiments.baselines` (word vectors, recurrent encoders, transformer
bi- and cross-encoders, LoRA), the retrieval cost of a cross-encoder, then the table and plot.

MLflow (experiment ``stsreg-baselines``): one parent run ``baselines`` per runs folder, one child run per system
(params, the dev curve and training loss, metrics, predictions), the report logged to the parent. A finished system
is skipped on a rerun while its settings, data and code are unchanged; a system killed mid-training resumes from its
checkpoint.

    stsreg baselines                    # or: dvc repro baselines / make baselines
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

import numpy as np
import pandas as pd
from prefect import flow, task

from stsreg.infra import atomic, runtime, tracking
from pipelines.experiments.experiment_rows import Row, run_row
from stsreg.experiments import row_results
from stsreg.experiments.baselines import experiment, baselines_table, retrieval
from stsreg.infra.codehash import RowKey
from stsreg.infra.config import Params, load_params
from stsreg.infra.hashing import sha256_file
from stsreg.infra.public_tables import BASELINES_TABLE
from stsreg.product.data.catalogue import table_split
from stsreg.product.precision import cache_name

EXPERIMENT = "stsreg-baselines"
#: The study's figure: Spearman per system on its benchmark's test split (reports/baselines/stsb.png).
FIGURE = f"{BASELINES_TABLE}.png"
#: The code one system's run executes (the settings modules are in no key: the resolved values are, codehash.KEYLESS).
ROW_CODE = ("stsreg.experiments.baselines.experiment",)
#: What the retrieval cost measures with (its key: re-keyed by ``make recommit`` like the rows beside it).
RETRIEVAL_CODE = ("stsreg.experiments.baselines.retrieval",)


def system_key(params: Params, name: str, sts_sha: str, nli_sha: str) -> RowKey:
    """The settings the system reads, seed, data and code: a rerun reuses a finished system only if all are
    unchanged (a setting that only other systems read does not rerun it)."""
    parts = {"system": name, "seed": params.seed, "settings": experiment.settings(params, name),
             "precision": cache_name(params.model.precision),
             "evaluate": dataclasses.asdict(params.evaluate), "sts": sts_sha}
    if experiment.SYSTEMS[name].uses_nli:
        parts["nli"] = nli_sha
    return RowKey(parts, ROW_CODE)


@task(name="baselines-parent")
def baselines_parent(params_path: str, runs_dir: str) -> str:
    """The parent MLflow run of this runs folder (created once, reused by a rerun so every system stays under it)."""
    marker = Path(runs_dir) / "_parent.json"
    run_id = atomic.read_json(marker).get("mlflow_run_id")
    if run_id:
        try:
            tracking.client().get_run(run_id)
            return run_id
        except Exception:  # the tracking store was reset: start a new parent
            pass
    params = load_params(params_path)
    run_id = tracking.start_run(EXPERIMENT, "baselines", {"baselines": dataclasses.asdict(params.baselines),
                                                          "seed": params.seed},
                                tracking.environment_tags(runtime.device_name()))
    atomic.write_json(marker, {"mlflow_run_id": run_id})
    return run_id


@task(name="baselines-system", task_run_name="{name}")
def baselines_system(params_path: str, name: str, sts_path: str, nli_path: str, runs_dir: str, out_dir: str,
                     parent: str) -> dict:
    params = load_params(params_path)
    key = system_key(params, name, sha256_file(sts_path), sha256_file(nli_path))
    logged = {"system": name, "seed": params.seed, "baselines": experiment.settings(params, name)}
    # the weights stay in the work folder (the results travel in rows/)
    row = Row(name, key, EXPERIMENT, logged, {"system": name, "mlflow.parentRunId": parent},
                   Path(runs_dir) / name, row_results.folder(out_dir), ("predictions.parquet", "fit_summary.json"),
                   "baselines", keep_work=True)
    return run_row(row, lambda run: experiment.run_system(params, name, pd.read_parquet(sts_path),
                                                                pd.read_parquet(nli_path), row.work, run))


@task(name="baselines-retrieval")
def baselines_retrieval(params_path: str, sts_path: str, out_dir: str) -> dict:
    """Pairs/s of a bi-encoder and a cross-encoder scoring one query against ``retrieval_candidates`` sentences
    (distinct sentences of the STS tables, sampled with the seed); measured once per backbone / size / code."""
    params = load_params(params_path)
    p = params.baselines
    out = row_results.folder(out_dir) / "retrieval.json"  # a result: it travels with the rows
    key = RowKey({"backbone": p.backbone, "n": p.retrieval_candidates, "max_length": p.max_length,
                  "precision": cache_name(params.model.precision), "seed": params.seed, "sts": sha256_file(sts_path)},
                 RETRIEVAL_CODE)
    cached = atomic.read_json(out)
    if cached.get("fingerprint") == key.fingerprint:
        return cached
    sts = pd.read_parquet(sts_path)
    sentences = sorted(set(sts.sentence1) | set(sts.sentence2))
    rng = np.random.default_rng(params.seed)
    pick = rng.choice(len(sentences), size=min(p.retrieval_candidates, len(sentences)), replace=False)
    query = table_split(sts, BASELINES_TABLE, "test").sentence1.iloc[0]
    result = {**retrieval.retrieval_cost(p.backbone, [sentences[i] for i in pick], query, p.max_length,
                                          precision=params.model.precision),
              "query": query, "fingerprint": key.fingerprint, "parts": key.parts, "code": list(key.code)}
    atomic.write_json(out, result)
    return result


@task(name="baselines-report")
def baselines_report(params_path: str, out_dir: str, metrics_path: str, compare_results: str, parent: str) -> dict:
    params = load_params(params_path)
    rows = row_results.folder(out_dir)
    runs, unavailable = [], {}
    for name in params.baselines.systems:
        meta = row_results.read_json(rows, name, "run.json")
        if meta.get("unavailable"):
            unavailable[name] = meta["unavailable"]
        else:
            runs.append({"system": name, **row_results.read_json(rows, name, "fit_summary.json"),
                         **row_results.metrics(rows, name)})
    table = baselines_table.rows_table(pd.DataFrame(runs)) if runs else pd.DataFrame()
    out = Path(out_dir)
    atomic.to_csv(table, out / "results.csv")
    ref = pd.read_csv(compare_results) if Path(compare_results).exists() else None
    retrieval = atomic.read_json(rows / "retrieval.json") or None
    md = baselines_table.format_table(table, unavailable, ref, retrieval, params.baselines.backbone, params.seed)
    atomic.write_text(out / "results.md", md + "\n")
    if not table.empty:
        baselines_table.plot(table, out / FIGURE)
    # the headline: STS-B test Spearman per system (avg7 and the intervals are in results.csv)
    key = f"{BASELINES_TABLE}_spearman"
    summary = {f"{r.system}_{key}": float(getattr(r, key)) for r in table.itertuples()}
    atomic.write_text(metrics_path, json.dumps(summary, indent=2))  # last
    cost = {k: v for k, v in (retrieval or {}).items() if k.endswith(("per_s", "seconds"))}
    tracking.log_report(parent, {**summary, **cost}, out, ("results.md", "results.csv", FIGURE), "baselines")
    tracking.end_run(parent)
    print(md)
    return summary


@flow(name="stsreg-baselines")
def baselines_flow(params_path: str = "params.yaml", sts_path: str = "data/prepared/sts.parquet",
                   nli_path: str = "data/prepared/nli_train.parquet", runs_dir: str = "reports/baselines/runs",
                   out_dir: str = "reports/baselines", metrics_path: str = "metrics/baselines.json",
                   compare_results: str = "reports/compare/results.csv") -> dict:
    params = load_params(params_path)
    parent = baselines_parent(params_path, runs_dir)
    for name in params.baselines.systems:
        baselines_system(params_path, name, sts_path, nli_path, runs_dir, out_dir, parent)
    baselines_retrieval(params_path, sts_path, out_dir)
    return baselines_report(params_path, out_dir, metrics_path, compare_results, parent)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description="Run the baselines experiment as a Prefect flow.")
    ap.add_argument("--params", default="params.yaml")
    print(baselines_flow(params_path=ap.parse_args().params))

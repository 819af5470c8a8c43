"""What every experiment row and table does, whichever experiment it belongs to (the comparison, the NLI table, the
baselines): a row trains and scores in one MLflow run, keeps its results in ``<out>/rows/``
(:mod:`stsreg.experiments.row_results`), is skipped on a rerun while its key (settings, seed, data, code) holds and
resumes from its work folder when killed mid-training; a table of rows x seeds writes its runs, results, paired tests
and plot, then its report run.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pandas as pd

from stsreg.experiments import row_results, run_folders, run_tables
from stsreg.infra import atomic, runtime, tracking
from stsreg.infra.codehash import RowKey

#: What a table's report run logs (those present).
REPORT_FILES = ("results.md", "results.csv", "runs.csv", "paired.csv", "avg7.png")


@dataclass(frozen=True)
class Row:
    """One row: its ``name`` (``<method>-<seed>``, or a baseline system) and ``key``; the MLflow ``experiment`` its
    run goes to, with the ``logged`` params and the row's own ``tags``; its ``work`` folder (weights, checkpoints) and
    the ``rows`` folder its results travel in; the files of the work logged to the run (``artifacts``, those present,
    under ``artifact_path``); ``keep_work``: the work folder stays after the results are kept (a baseline's weights)."""

    name: str
    key: RowKey
    experiment: str
    logged: dict
    tags: dict[str, str]
    work: Path
    rows: Path
    artifacts: tuple[str, ...] = ("table.md", "predictions.parquet")
    artifact_path: str = "eval"
    keep_work: bool = False


def run_row(row: Row, train_and_score: Callable[[tracking.MetricBuffer], dict]) -> dict:
    """The row's metrics: the kept ones when ``row.rows`` holds its key's results; else ``train_and_score(run)``
    (training in ``row.work``, logging to ``run``) inside the row's MLflow run, then kept. A row that cannot run here
    (:class:`stsreg.experiments.row_results.Unavailable`) is kept as such and gives ``{"unavailable": why}``."""
    if row_results.is_done(row.rows, row.name, row.key.fingerprint):
        return row_results.outcome(row.rows, row.name)
    run_folders.prepare(row.work, row.key.fingerprint)  # a killed row of this key resumes from its checkpoint
    tags = {**tracking.environment_tags(runtime.device_name()), **row.tags, "fingerprint": row.key.fingerprint}
    with tracking.tracked_run(row.experiment, row.name, row.logged, tags) as run:
        try:
            metrics = train_and_score(run)
        except row_results.Unavailable as why:
            tracking.client().set_tag(run.run_id, "unavailable", str(why))
            row_results.keep(row.work, row.rows, row.name, row.key, run.run_id, unavailable=str(why))
            return {"unavailable": str(why)}
        atomic.write_json(row.work / "metrics.json", metrics)
        tracking.log_report(run.run_id, metrics, row.work, row.artifacts, row.artifact_path)
    # the results travel in rows/ (the marker a rerun trusts written last); the weights go unless kept
    row_results.keep(row.work, row.rows, row.name, row.key, run.run_id)
    if not row.keep_work:
        shutil.rmtree(row.work, ignore_errors=True)
    return metrics


@dataclass(frozen=True)
class Table:
    """A table of ``names`` (methods, objectives) x ``seeds`` read from ``out_dir/rows``; ``pairs(table)``: the
    (reference, other) rows its paired tests compare; ``n_resamples`` and ``seed``: the bootstrap's."""

    out_dir: Path
    names: tuple[str, ...]
    seeds: tuple[int, ...]
    pairs: Callable[[pd.DataFrame], list]
    n_resamples: int
    seed: int

    def build(self) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame | None]:
        """(runs: one row per run, results: mean and interval per name, paired tests or None), written with the plot
        (``runs.csv``, ``results.csv``, ``paired.csv``, ``avg7.png``); rows of names no longer listed are pruned."""
        rows = row_results.folder(self.out_dir)
        runs = run_tables.collect(rows, self.names, self.seeds)
        table = run_tables.results_table(runs)
        pairs = self.pairs(table)
        tests = run_tables.paired_tests(rows, pairs, self.seeds, self.n_resamples, self.seed) if pairs else None
        row_results.prune(rows)
        atomic.to_csv(runs, self.out_dir / "runs.csv")
        atomic.to_csv(table, self.out_dir / "results.csv")
        if tests is not None:
            atomic.to_csv(tests, self.out_dir / "paired.csv")
        run_tables.plot_methods(table, self.out_dir / "avg7.png")
        return runs, table, tests


@dataclass(frozen=True)
class Report:
    """A table's report: ``markdown`` (results.md), the headline ``summary`` (written to ``metrics_path`` last) and
    its MLflow run (``experiment``, run ``name``, ``logged`` params; the files logged under ``artifact_path``)."""

    markdown: str
    summary: dict
    metrics_path: str
    experiment: str
    name: str
    logged: dict = field(default_factory=dict)
    artifact_path: str = ""

    def publish(self, out_dir: Path, files: tuple[str, ...] = REPORT_FILES) -> dict:
        """Write results.md and the headline, log the report run, print the table; returns the headline."""
        atomic.write_text(out_dir / "results.md", self.markdown + "\n")
        atomic.write_text(self.metrics_path, json.dumps(self.summary, indent=2))  # last
        tags = tracking.environment_tags(runtime.device_name())
        with tracking.tracked_run(self.experiment, self.name, self.logged, tags) as run:
            tracking.log_report(run.run_id, self.summary, out_dir, files, self.artifact_path or self.name)
        print(self.markdown)
        return self.summary

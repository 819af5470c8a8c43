"""Folders of resumable experiment runs and their finished marker.

A work folder (NLI-table rows, baseline systems) holds one run while it trains: ``<work>/key.json`` names the
configuration it holds, so its checkpoint may be resumed (:func:`prepare`). A finished run's marker ``run.json``
(:func:`mark_done`, written last; :func:`is_done` trusts it) is written into the row's results folder
(:mod:`stsreg.experiments.row_results`), not the work folder, which goes or stays heavy-only.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from stsreg.infra import atomic


def is_done(run_dir: Path, expected: str) -> bool:
    """True when ``run_dir/run.json`` names the fingerprint ``expected``: a finished run of that configuration."""
    return atomic.read_json(run_dir / "run.json").get("fingerprint") == expected


def prepare(work: Path, key: str) -> None:
    """Ready the work folder ``work`` for ``key``: a folder left by another configuration is removed first (its
    checkpoint must not be resumed), a folder of the same key keeps its checkpoint, and ``key.json`` records the key.
    Whether the run is finished is asked of its results (:func:`stsreg.experiments.row_results.is_done`), not here."""
    held = work / "key.json"
    if work.exists() and atomic.read_json(held).get("key") != key:
        shutil.rmtree(work)
    work.mkdir(parents=True, exist_ok=True)
    atomic.write_json(held, {"key": key})


def mark_done(work: Path, key: str, mlflow_run_id: str, **extra) -> None:
    """The marker a rerun trusts: written last and atomically, so a killed run is never taken as finished."""
    atomic.write_json(work / "run.json", {"fingerprint": key, "mlflow_run_id": mlflow_run_id, **extra})

"""Folders of resumable experiment runs (NLI-table rows, baseline systems): one folder per run, keyed by the
fingerprint of its settings, data and code.

``<work>/key.json`` names the configuration the folder holds, so its checkpoint may be resumed; ``<work>/run.json``
marks a finished run. :func:`mark_done` writes it last, and :func:`is_done` trusts it (the comparison's runs use the
same marker).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from stsreg.infra import atomic


def is_done(run_dir: Path, expected: str) -> bool:
    """True when ``run_dir/run.json`` names the fingerprint ``expected``: a finished run of that configuration."""
    meta = run_dir / "run.json"
    return meta.exists() and json.loads(meta.read_text()).get("fingerprint") == expected


def prepare(work: Path, key: str) -> bool:
    """True when ``work`` holds a finished run of ``key`` (reuse it, run nothing). Otherwise ready ``work`` for
    ``key``: a folder left by another configuration is removed first (its checkpoint must not be resumed), a folder
    of the same key keeps its checkpoint, and ``key.json`` records the key."""
    if is_done(work, key):
        return True
    held = work / "key.json"
    if work.exists() and (not held.exists() or json.loads(held.read_text()).get("key") != key):
        shutil.rmtree(work)
    work.mkdir(parents=True, exist_ok=True)
    atomic.write_json(held, {"key": key})
    return False


def mark_done(work: Path, key: str, mlflow_run_id: str, **extra) -> None:
    """The marker a rerun trusts: written last and atomically, so a killed run is never taken as finished."""
    atomic.write_json(work / "run.json", {"fingerprint": key, "mlflow_run_id": mlflow_run_id, **extra})

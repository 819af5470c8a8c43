"""Time to a champion: each step of the last pipeline run, its wall time, the precision it ran in and the CPU/GPU.

Read from what the steps leave beside their outputs, never in them (a DVC output holds only what its inputs
decide): ``.stsreg/runs/prepare.json`` (:func:`record`: prepare has no MLflow run) and the project's MLflow store
(the latest finished ``stage1``, ``stage2``, ``evaluate``, ``register`` and ``promote`` runs of experiment
``stsreg``: metric ``wall_seconds``, tags ``precision``, ``host_cpu``, ``device``). ``stsreg report`` prints it.
A step without model compute (register; promote once a champion exists) has precision ``none``, shown as "-".
"""

from __future__ import annotations

import json
import time
from contextlib import contextmanager
from pathlib import Path

from stsreg.infra.local_servers import STATE_DIR
from stsreg.infra.tracking import cpu_name
from stsreg.infra import atomic, tracking

#: The MLflow runs of a pipeline run, in order.
RUNS = ("stage1", "stage2", "evaluate", "register", "promote")


def latest_runs(uri: str, experiment: str = "stsreg") -> dict:
    """``{run name: the latest FINISHED run}`` of :data:`RUNS` in ``uri`` (absent names skipped; {} without a store)."""
    if uri.startswith("sqlite:///") and not Path(uri.removeprefix("sqlite:///")).is_file():
        return {}
    client = tracking.client(uri)
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        return {}
    found = {}
    for name in RUNS:
        runs = client.search_runs([exp.experiment_id], f"attributes.run_name = '{name}' and attributes.status = "
                                                       f"'FINISHED'",
                                  order_by=["attributes.start_time DESC"], max_results=1)
        if runs:
            found[name] = runs[0]
    return found


def _minutes(seconds: float | None) -> str:
    return "" if seconds is None else f"{int(seconds // 60)} min {seconds % 60:04.1f} s"


#: Where a step without an MLflow run records its last run (relative to the project, in its state folder).
RECORDS = Path(STATE_DIR) / "runs"


def record(step: str, seconds: float, project: Path = Path(".")) -> None:
    """The last run of ``step`` (its wall time and CPU) under ``<project>/.stsreg/runs/``, read by
    :func:`format_timings`."""
    atomic.write_json(project / RECORDS / f"{step}.json", {"wall_seconds": round(seconds, 1), "host_cpu": cpu_name()})


@contextmanager
def timed(step: str, project: Path = Path(".")):
    """Time the block and :func:`record` it as ``step``'s last run once it finishes (a failed run records nothing)."""
    started = time.monotonic()
    yield
    record(step, time.monotonic() - started, project)


def format_timings(uri: str, project: Path = Path(".")) -> str:
    """A markdown table of the last run's steps (empty when nothing was recorded)."""
    rows = []
    prepare = project / RECORDS / "prepare.json"
    if prepare.exists():
        fact = json.loads(prepare.read_text(encoding="utf-8"))
        rows.append(("prepare", fact.get("wall_seconds"), "", fact.get("host_cpu", "")))
    for name, run in latest_runs(uri).items():
        tags = run.data.tags
        device = tags.get("device", "")
        where = tags.get("host_cpu", "") if device in ("", "cpu") else device
        precision = tags.get("precision", "")
        rows.append((name, run.data.metrics.get("wall_seconds"), "-" if precision == "none" else precision, where))
    if not rows:
        return ""
    total = sum(r[1] for r in rows if r[1] is not None)
    lines = ["| step | wall | precision | on |", "|---|---:|---|---|"]
    lines += [f"| {name} | {_minutes(wall)} | {prec} | {where} |" for name, wall, prec, where in rows]
    lines.append(f"| **total** | **{_minutes(total)}** | | |")
    return "\n".join(lines)

"""Time to a champion: each step of the last pipeline run, its wall time, the precision it ran in and the CPU/GPU.

Read from what the steps leave: ``data/prepared/summary.json`` (prepare's ``wall_seconds``) and the project's MLflow
store (the latest finished ``stage1``, ``stage2``, ``evaluate``, ``register`` and ``promote`` runs of experiment
``stsreg``: metric ``wall_seconds``, tags ``precision``, ``host_cpu``, ``device``). ``stsreg report`` prints it.
A step without model compute (register; promote once a champion exists) has precision ``none``, shown as "-".
"""

from __future__ import annotations

import json
from pathlib import Path

#: The MLflow runs of a pipeline run, in order.
RUNS = ("stage1", "stage2", "evaluate", "register", "promote")


def latest_runs(uri: str, experiment: str = "stsreg") -> dict:
    """``{run name: the latest FINISHED run}`` of :data:`RUNS` in ``uri`` (absent names skipped; {} without a store)."""
    if uri.startswith("sqlite:///") and not Path(uri.removeprefix("sqlite:///")).is_file():
        return {}
    from stsreg.infra import tracking

    client = tracking.client(uri)
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        return {}
    found = {}
    for name in RUNS:
        runs = client.search_runs([exp.experiment_id], f"attributes.run_name = '{name}' and attributes.status = 'FINISHED'",
                                  order_by=["attributes.start_time DESC"], max_results=1)
        if runs:
            found[name] = runs[0]
    return found


def _minutes(seconds: float | None) -> str:
    return "" if seconds is None else f"{int(seconds // 60)} min {seconds % 60:04.1f} s"


def format_timings(data_summary: Path, uri: str) -> str:
    """A markdown table of the last run's steps (empty when nothing was recorded)."""
    rows = []
    if data_summary.exists():
        wall = json.loads(data_summary.read_text(encoding="utf-8")).get("wall_seconds")
        if wall is not None:
            rows.append(("prepare", wall, "", ""))
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

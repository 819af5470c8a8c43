"""The loop's clock: from ``stsreg data add`` to the running server answering with the new champion, phase by phase.

The retrain flow (``pipelines/product/ops_flow.py``) keeps one :class:`Clock` per run and writes it into
``reports/retrain/last_run.json`` (key ``clock``) and its Prefect artifact; ``stsreg report`` prints it
(:func:`format_clock`). Phases, in order (a phase that did not happen is absent):

- ``trigger``: the rows were added (``data add`` started) -> the retrain flow runs (event, automation, worker,
  flow-run process start);
- ``lock``: waiting for the project's pipeline lock (another run held it);
- one phase per DVC stage of the chain (``fetch`` .. ``promote``), ``ran`` false when it was up to date;
- ``served``: the promotion -> the first server following ``@champion`` answers with the new version.

Times are epoch seconds (``time.time()``) of this machine; ``seconds`` is each phase's length.
"""

from __future__ import annotations

import time
from contextlib import contextmanager


class Clock:
    """Phases as ``{"phase", "start", "end", "seconds", **extra}`` dicts, in the order they ended."""

    def __init__(self, origin: float | None = None):
        #: where the clock starts: the moment the data was added (None: the flow's own start)
        self.origin = origin
        self.phases: list[dict] = []

    def add(self, phase: str, start: float, end: float, **extra) -> dict:
        row = {"phase": phase, "start": start, "end": end, "seconds": round(end - start, 2), **extra}
        self.phases.append(row)
        return row

    @contextmanager
    def phase(self, name: str, **extra):
        """Time the block as phase ``name``; the yielded dict takes more fields (e.g. ``ran``). A block that raises
        is recorded too, with ``failed: true``."""
        start, fields = time.time(), dict(extra)
        try:
            yield fields
        except BaseException:
            self.add(name, start, time.time(), **fields, failed=True)
            raise
        self.add(name, start, time.time(), **fields)

    def as_dict(self) -> dict:
        """``{"origin", "phases", "total_s"}``: total from the origin (else the first phase) to the last phase's end."""
        first = self.origin if self.origin is not None else (self.phases[0]["start"] if self.phases else None)
        end = self.phases[-1]["end"] if self.phases else None
        total = round(end - first, 2) if first is not None and end is not None else None
        return {"origin": self.origin, "phases": self.phases, "total_s": total}


def clock_time(seconds: float) -> str:
    """Seconds as min:s with a tenth (``125.3`` -> ``2:05.3``), as the clock tables show them."""
    return f"{int(seconds // 60)}:{seconds % 60:04.1f}"


def format_clock(report: dict) -> str:
    """A markdown table of a retrain report's clock (``reports/retrain/last_run.json``): each phase, its length and
    when it ended counted from the start, then the total and whether the server answered with the new version."""
    clock = report.get("clock") or {}
    phases = clock.get("phases") or []
    if not phases:
        return ""
    origin = clock.get("origin") or phases[0]["start"]
    lines = ["| phase | took (min:s) | done at (min:s from the start) | |", "|---|---:|---:|---|"]
    for p in phases:
        note = "failed" if p.get("failed") else ("up to date" if p.get("ran") is False else p.get("note", ""))
        lines.append(f"| {p['phase']} | {clock_time(p['seconds'])} | {clock_time(p['end'] - origin)} | {note} |")
    start = "the rows were added" if clock.get("origin") else "the retrain started"
    served = report.get("served") or {}
    tail = (f"the server answered with v{served['version']}" if served.get("answered")
            else f"no server answered with a new version: {served.get('why') or 'no new champion'}")
    total = clock.get("total_s")
    return "\n".join(lines) + f"\n\nFrom when {start} to the end: {clock_time(total) if total else '?'}; {tail}."

"""``make bench-loop``: the loop's own clock, from ``stsreg data add`` to the running server answering the new champion.

In the example project (:mod:`benchmarks.loop_project`: a clone of this one with the worked example's ``qa`` table):

1. round 1 by hand (``dvc repro promote``) when the project's registry has no champion yet: not timed here;
2. ``stsreg servers start`` (Prefect + MLflow + a process worker, on their own ports), ``stsreg deploy`` (the retrain
   deployment with its data trigger) and ``stsreg serve`` of ``@champion`` following the alias;
3. a light load on the server (:class:`benchmarks.loop_load.Load`: a /similarity request every ``1/rps`` s) and
   ``stsreg data add qa_new_rows.jsonl --table qa``;
4. the clock: the retrain's phases (``reports/retrain/last_run.json``, :mod:`stsreg.product.loop_clock`), the add
   itself, the moment the load first got an answer from the new version, and every request that failed.

When the gate keeps the champion, the swap is still timed: ``stsreg champion set`` moves the alias to the challenger
(said in the report). Writes ``reports/benchmarks-loop.{md,json}`` with the CPU, precision and the overrides.

    python -m benchmarks.loop [--dir build/bench-loop] [-S stage2.max_train_pairs=2000 ...]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.loop_load import Load
from benchmarks.loop_project import NEW_ROWS, make_project
from benchmarks.serve_rows import free_port
from stsreg.infra.local_servers import wait_healthy

REPO = Path(__file__).resolve().parents[1]
STSREG = str(Path(sys.executable).with_name("stsreg"))


#: The caller's settings that must not reach the project: its commands use its own servers (whether a caller uses
#: its own or none), store and mirror.
CALLERS = ("PREFECT_API_URL", "MLFLOW_TRACKING_URI", "STSREG_DATA_MIRROR", "STSREG_USE_SERVERS")


def _env(project: Path) -> dict:
    """The environment of the project's commands: theirs alone (no server variable of the caller's leaks in)."""
    return {k: v for k, v in os.environ.items() if k not in CALLERS}


def _has_champion(project: Path, uri: str | None = None) -> bool:
    """Whether the project's own registry (``uri``, else its embedded store; never the caller's) has a ``@champion``.
    Not a file of the project: a clone carries the committed ``reports/registry/promotion.json`` of the project it
    came from."""
    from stsreg.infra import tracking
    from stsreg.product import registry

    return registry.version_by_alias(tracking.client(uri or tracking.embedded_uri(project)), registry.MODEL_NAME,
                                     "champion") is not None


def _sh(cmd: list[str], project: Path, timeout: float | None = None) -> tuple[float, str]:
    began = time.monotonic()
    proc = subprocess.run(cmd, cwd=project, env=_env(project), text=True, capture_output=True, timeout=timeout)
    if proc.returncode:
        raise SystemExit(f"`{' '.join(cmd)}` failed (exit {proc.returncode}):\n{(proc.stdout + proc.stderr)[-4000:]}")
    return time.monotonic() - began, proc.stdout


def _last_run(project: Path, after: float, timeout_s: float) -> dict:
    """The retrain report written after ``after`` (epoch s), waited for up to ``timeout_s``."""
    path = project / "reports/retrain/last_run.json"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists() and path.stat().st_mtime > after:
            return json.loads(path.read_text())
        time.sleep(5)
    raise SystemExit(f"no retrain report after {timeout_s:g} s: see the Prefect UI's stsreg-retrain flow runs")


def run(project: Path, table: str, rows: Path, rps: float, timeout_s: float, database: str | None = None) -> dict:
    """Round 1 (when the project has no gate decision yet), servers (on PostgreSQL at ``database``: the team's stack;
    else the embedded SQLite stores), deployment, server, load, ``rows`` added to ``table``, the clock. Returns the
    measurements."""
    out = {"project": str(project), "load_every_s": round(1 / rps, 3),
           "stack": "PostgreSQL (stsreg servers start --database)" if database else "embedded (SQLite)"}
    if not database and not _has_champion(project):
        out["round1_s"] = round(_sh(["dvc", "repro", "promote"], project)[0], 1)
    prefect, mlflow_port = free_port(), free_port()  # taken now: round 1's own servers came and went before
    _sh([STSREG, "servers", "start", "--prefect-port", str(prefect), "--mlflow-port", str(mlflow_port),
         *(["--database", database] if database else [])], project)
    server = None
    try:
        # the team's registry is the server's: its round 1 registers there, through the running servers
        if database and not _has_champion(project, f"http://127.0.0.1:{mlflow_port}"):
            out["round1_s"] = round(_sh(["dvc", "repro", "promote"], project)[0], 1)
        _sh([STSREG, "deploy"], project)
        port = free_port()
        log = project / ".stsreg/logs/bench-loop-serve.log"  # a file, not a pipe nobody reads while it serves
        server = subprocess.Popen([STSREG, "serve", "--model-uri", "models:/sts-regression@champion", "--port",
                                   str(port), "--follow-s", "2"], cwd=project, env=_env(project),
                                  stdout=open(log, "w"), stderr=subprocess.STDOUT)
        url, began = f"http://127.0.0.1:{port}", time.monotonic()
        wait_healthy(f"{url}/ready", lambda: server.poll() is None, "stsreg serve", log, 900)
        out["serve_ready_s"] = round(time.monotonic() - began, 1)
        with Load(url, rps) as load:
            time.sleep(5)  # the load runs before the rows arrive
            began = time.time()
            out["data_add_s"] = round(_sh([STSREG, "data", "add", str(rows), "--table", table], project)[0], 1)
            report = _last_run(project, began, timeout_s)
            if not report.get("promoted") and report.get("new_version"):
                version = report["after"]["latest"]
                _sh([STSREG, "champion", "set", str(version), "--reason", "make bench-loop: time the swap"], project)
                out["swap_by_hand"] = {"version": version, "set_at": time.time()}
            target = str(report["after"]["champion"] if report.get("promoted") else report["after"]["latest"])
            out["load_new_version_at"] = load.wait_for(target, 600)
            time.sleep(5)
        out.update(report=report, load=load.summary(), data_added_at=began)
    finally:
        if server:
            server.send_signal(signal.SIGTERM)
            server.wait(60)
        _sh([STSREG, "servers", "stop"], project)
    return out


def main(argv: list[str] | None = None) -> int:
    from benchmarks.loop_report import write

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", type=Path, default=REPO / "build/bench-loop", help="where the example project goes")
    ap.add_argument("-S", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                    help="a params override of the example project (e.g. stage2.max_train_pairs=2000)")
    ap.add_argument("--rps", type=float, default=2.0, help="the light load: requests per second on the server")
    ap.add_argument("--timeout-s", type=float, default=3 * 3600, help="the longest the retrain may take")
    ap.add_argument("--out", default=str(REPO / "reports/benchmarks-loop"), help="report path without extension")
    ap.add_argument("--database", default=None, metavar="URL",
                    help="run the servers on this PostgreSQL (the team's stack; `stsreg postgres start` prints one)")
    a = ap.parse_args(argv)
    project = make_project(REPO, a.dir.resolve() / "project", a.overrides)  # rows and clone: cwd-independent
    measured = run(project, "qa", project.parent / NEW_ROWS, a.rps, a.timeout_s, a.database)
    measured["about"] = ("the worked example of docs/own_data.md (its `qa` table; the rows added: the 20% of it that "
                         "arrive later) in a clone of this project sharing its DVC cache")
    print(write(measured, a.overrides, Path(a.out)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

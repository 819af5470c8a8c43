"""Local Prefect server + UI, MLflow tracking server + UI and a Prefect process worker, started and stopped together.

    stsreg servers start     # prints the URLs; state under the project: .stsreg/ (Prefect), mlflow/ (MLflow)
    stsreg servers status
    stsreg servers stop

Both servers listen on 127.0.0.1 only. Defaults keep every byte under the project: Prefect's SQLite database in
``.stsreg/prefect/``, MLflow's ``mlflow/mlflow.db`` + ``mlflow/artifacts`` (the same store the pipeline writes to
when no server runs, so runs logged before show up in the UI). Teams point them elsewhere with environment
variables: ``PREFECT_API_DATABASE_CONNECTION_URL`` (e.g. ``postgresql+asyncpg://...``), ``STSREG_MLFLOW_BACKEND_URI``
(e.g. ``postgresql://...``) and ``STSREG_MLFLOW_ARTIFACTS`` (e.g. ``s3://bucket/stsreg``).

While the servers run, ``.stsreg/servers.json`` holds their URLs and :func:`use_running` (called by the ``stsreg``
CLI) points ``PREFECT_API_URL`` and ``MLFLOW_TRACKING_URI`` at them; when they are down the pipeline falls back
to the embedded defaults (ephemeral Prefect, SQLite MLflow).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

STATE_DIR = ".stsreg"
POOL = "stsreg-process"


@dataclass(frozen=True)
class Layout:
    """Where a project keeps its server state."""

    project: Path

    @property
    def state(self) -> Path:
        return self.project / STATE_DIR

    @property
    def urls_file(self) -> Path:
        return self.state / "servers.json"

    def pid_file(self, name: str) -> Path:
        return self.state / "run" / f"{name}.pid"

    def log_file(self, name: str) -> Path:
        return self.state / "logs" / f"{name}.log"


def _healthy(url: str, timeout: float = 1.0) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status == 200
    except OSError:
        return False


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


def _bin(name: str) -> str:
    """The console script next to this interpreter (the project's venv), else whatever is on PATH."""
    local = Path(sys.executable).with_name(name)
    return str(local) if local.exists() else name


def server_env(layout: Layout) -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("PREFECT_HOME", str(layout.state / "prefect"))
    env.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    env.setdefault("DO_NOT_TRACK", "true")
    env.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    env["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] = "false"  # else ~7 job workers (~1.7 GB) start with the server
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # dvc/stsreg of this venv for flows
    return env


def _spawn(layout: Layout, name: str, cmd: list[str], env: dict[str, str]) -> int:
    layout.pid_file(name).parent.mkdir(parents=True, exist_ok=True)
    layout.log_file(name).parent.mkdir(parents=True, exist_ok=True)
    log = open(layout.log_file(name), "ab")
    proc = subprocess.Popen(cmd, cwd=layout.project, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True)  # own process group: stop() takes its children too
    layout.pid_file(name).write_text(str(proc.pid))
    return proc.pid


def _wait(url: str, pid: int, name: str, log: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _healthy(url):
            return
        if not _alive(pid):
            raise RuntimeError(f"{name} exited during start-up; see {log}:\n" + log.read_text(errors="replace")[-2000:])
        time.sleep(0.5)
    raise RuntimeError(f"{name} did not answer {url} within {timeout:.0f} s; see {log}")


def start(project: Path, prefect_port: int = 4200, mlflow_port: int = 5000, worker: bool = True,
          timeout: float = 180.0, host: str = "127.0.0.1") -> dict[str, str]:
    """Start the servers (and a worker for pool ``stsreg-process``) unless already running; returns their URLs.

    ``host``: the address they listen on; ``0.0.0.0`` lets workers on other machines reach them (the URLs then name
    this machine by its host name). MLflow proxies artifacts, so a worker needs only the two URLs."""
    import socket
    layout = Layout(project.resolve())
    current = status(layout.project)
    if current.get("running"):
        return current
    stop(layout.project)  # clear half-started leftovers
    env = server_env(layout)
    backend = os.environ.get("STSREG_MLFLOW_BACKEND_URI", f"sqlite:///{layout.project / 'mlflow' / 'mlflow.db'}")
    artifacts = os.environ.get("STSREG_MLFLOW_ARTIFACTS", str(layout.project / "mlflow" / "artifacts"))
    (layout.project / "mlflow").mkdir(exist_ok=True)
    name = socket.getfqdn() if host in ("0.0.0.0", "::") else host
    urls = {"prefect": f"http://{name}:{prefect_port}", "mlflow": f"http://{name}:{mlflow_port}"}
    urls["prefect_api"] = urls["prefect"] + "/api"
    mlflow_pid = _spawn(layout, "mlflow", [_bin("mlflow"), "server", "--host", host, "--port", str(mlflow_port),
                                           "--backend-store-uri", backend, "--serve-artifacts",
                                           "--artifacts-destination", artifacts,
                                           "--workers", "1"], env)
    prefect_pid = _spawn(layout, "prefect", [_bin("prefect"), "server", "start", "--host", host, "--port",
                                             str(prefect_port), "--analytics-off"], env)
    _wait(urls["prefect_api"] + "/health", prefect_pid, "prefect server", layout.log_file("prefect"), timeout)
    _wait(urls["mlflow"] + "/health", mlflow_pid, "mlflow server", layout.log_file("mlflow"), timeout)
    if worker:
        wenv = {**env, "PREFECT_API_URL": urls["prefect_api"], "MLFLOW_TRACKING_URI": urls["mlflow"]}
        _spawn(layout, "worker", [_bin("prefect"), "worker", "start", "--pool", POOL, "--type", "process"], wenv)
    layout.urls_file.write_text(json.dumps(urls, indent=2))
    return {**urls, "running": True}


def _recorded(layout: Layout, timeout: float = 1.0) -> tuple[dict, bool]:
    """(URLs written by :func:`start`, or {} — whether both servers answer their health checks)."""
    if not layout.urls_file.exists():
        return {}, False
    urls = json.loads(layout.urls_file.read_text())
    return urls, _healthy(urls["prefect_api"] + "/health", timeout) and _healthy(urls["mlflow"] + "/health", timeout)


def status(project: Path) -> dict:
    """URLs and whether both servers answer their health checks (and whether the worker process lives)."""
    layout = Layout(project.resolve())
    urls, up = _recorded(layout)
    if not urls:
        return {"running": False}
    pid = layout.pid_file("worker")
    return {**urls, "running": up, "worker": pid.exists() and _alive(int(pid.read_text()))}


def stop(project: Path, timeout: float = 30.0) -> list[str]:
    """Stop the worker first (a worker outliving its server hangs), then Prefect, then MLflow; returns what stopped."""
    layout = Layout(project.resolve())
    stopped = []
    for name in ("worker", "prefect", "mlflow"):
        pid_file = layout.pid_file(name)
        if not pid_file.exists():
            continue
        pid = int(pid_file.read_text())
        if _alive(pid):
            try:
                os.killpg(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            deadline = time.monotonic() + timeout
            while _alive(pid) and time.monotonic() < deadline:
                time.sleep(0.2)
                try:
                    os.waitpid(pid, os.WNOHANG)  # reap it when we are its parent (tests)
                except ChildProcessError:
                    pass
            if _alive(pid):
                os.killpg(pid, signal.SIGKILL)
            stopped.append(name)
        pid_file.unlink()
    layout.urls_file.unlink(missing_ok=True)
    return stopped


def use_running(project: Path = Path(".")) -> bool:
    """Point ``PREFECT_API_URL`` / ``MLFLOW_TRACKING_URI`` at the project's servers when they answer (variables
    already set win; ``STSREG_USE_SERVERS=0`` disables). Returns whether the servers are used."""
    if os.environ.get("STSREG_USE_SERVERS", "1") == "0":
        return False
    urls, up = _recorded(Layout(project.resolve()), timeout=0.5)
    if not up:
        return False
    os.environ.setdefault("PREFECT_API_URL", urls["prefect_api"])
    os.environ.setdefault("MLFLOW_TRACKING_URI", urls["mlflow"])
    return True

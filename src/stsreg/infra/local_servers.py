"""Local Prefect server + UI, MLflow tracking server + UI and a Prefect process worker, started and stopped together.

    stsreg servers start     # prints the URLs; state under the project: .stsreg/ (Prefect), mlflow/ (MLflow)
    stsreg servers status
    stsreg servers stop

Both servers listen on 127.0.0.1 unless told otherwise. Defaults keep every byte under the project: Prefect's SQLite
database in ``.stsreg/prefect/``, MLflow's ``mlflow/mlflow.db`` + ``mlflow/artifacts`` (the same store the pipeline
writes to when no server runs, so runs logged before show up in the UI). A team puts both stores on PostgreSQL with
one option, ``--database postgresql://...`` (:class:`Stores`, :mod:`stsreg.infra.postgres`); MLflow's artifacts stay
in a folder on the server's host (``--artifacts``), which every client reads and writes through the server
(``mlflow-artifacts:/``), so no other host needs its path or credentials.

While the servers run, ``.stsreg/servers.json`` holds their URLs and :func:`use_running` (called by the ``stsreg``
CLI) points ``PREFECT_API_URL`` and ``MLFLOW_TRACKING_URI`` at them; down, the pipeline uses the embedded defaults.

A ``prefect`` command reads ``prefect.toml`` in its folder before the user's profile: ``start`` writes the project's
(:mod:`stsreg.infra.prefect_project`: its server's API URL), ``stop`` removes it. So after ``make servers``, ``prefect
deployment run stsreg-retrain/weekly`` typed in this project talks to this server, and another project's is untouched.

Start-up fails fast and leaves nothing behind: a port already in use is refused before anything starts (naming the
port and the process that holds it, where the system tells), each store is opened once before its server starts (a
missing driver, a refused connection, a wrong password, a missing database: one line, in seconds), and a server that
fails to come up stops what it started.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from stsreg.infra import prefect_project
from stsreg.infra.mlflow_ui import label_experiments
from stsreg.infra.ports import check_ports
from stsreg.infra.postgres import DatabaseError, TeamDatabase, check_store_uri

STATE_DIR = ".stsreg"
POOL = "stsreg-process"
HEARTBEAT_S = 60  #: the worker's flow runs' heartbeat (s); 3 missed: Crashed (stsreg deploy's automation)

#: The processes ``start`` runs, in the order ``stop`` stops them (a worker outliving its server hangs).
PROCESSES = ("worker", "prefect", "mlflow")


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


@dataclass(frozen=True)
class Stores:
    """Where the servers keep their state. ``database``: a PostgreSQL URL for both servers' databases (None: MLflow's
    ``mlflow/mlflow.db`` and Prefect's SQLite under ``.stsreg/prefect``, or Prefect's own
    ``PREFECT_API_DATABASE_CONNECTION_URL`` when set); ``artifacts``: the folder MLflow's server keeps artifacts in,
    on its own host (None: ``mlflow/artifacts``)."""

    database: str | None = None
    artifacts: str | None = None

    def mlflow_backend(self, project: Path) -> str:
        if self.database:
            return TeamDatabase(self.database).store("mlflow")
        return f"sqlite:///{project / 'mlflow' / 'mlflow.db'}"

    def mlflow_artifacts(self, project: Path) -> str:
        if self.artifacts and "://" in self.artifacts:
            raise DatabaseError(f"--artifacts {self.artifacts}: a folder on this host (the MLflow server proxies "
                                "it to every client); object stores need their client installed, which this project "
                                "does not ship")
        return str(Path(self.artifacts).resolve()) if self.artifacts else str(project / "mlflow" / "artifacts")

    def prefect_env(self) -> dict[str, str]:
        return {"PREFECT_API_DATABASE_CONNECTION_URL": TeamDatabase(self.database).store("prefect")} \
            if self.database else {}

    def described(self) -> str:
        return TeamDatabase(self.database).redacted if self.database else "embedded (SQLite)"

    def prepare(self, project: Path, env: dict[str, str]) -> None:
        """Make the stores ready, or raise :class:`DatabaseError` in one line before any server starts: PostgreSQL's
        databases created and MLflow's migrated (``--database``), else each configured URL opened once."""
        if self.database:
            if env.get("PREFECT_API_DATABASE_CONNECTION_URL"):
                raise DatabaseError("--database and PREFECT_API_DATABASE_CONNECTION_URL both name Prefect's "
                                    "database: give one (unset the variable)")
            TeamDatabase(self.database).prepare()
            return
        if env.get("PREFECT_API_DATABASE_CONNECTION_URL"):
            check_store_uri(env["PREFECT_API_DATABASE_CONNECTION_URL"], "Prefect's server")


def healthy(url: str, timeout: float = 1.0) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status == 200
    except OSError:
        return False


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


def venv_bin(name: str) -> str:
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


def _spawn(layout: Layout, name: str, cmd: list[str], env: dict[str, str]) -> subprocess.Popen:
    layout.pid_file(name).parent.mkdir(parents=True, exist_ok=True)
    layout.log_file(name).parent.mkdir(parents=True, exist_ok=True)
    log = open(layout.log_file(name), "ab")
    proc = subprocess.Popen(cmd, cwd=layout.project, env=env, stdout=log, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL,
                            start_new_session=True)  # own process group: stop() takes its children too
    layout.pid_file(name).write_text(str(proc.pid))
    return proc


def wait_healthy(url: str, alive: Callable[[], bool], name: str, log: Path, timeout: float) -> None:
    """Return once ``url`` answers 200. RuntimeError with the tail of ``log`` when the server exits first (``alive()``
    turns false) or ``timeout`` seconds pass: the servers here, a benchmark's, a test's."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and alive():
        if healthy(url):
            return
        time.sleep(0.5)
    raise _gave_up(url, alive(), name, log, timeout)


def _gave_up(url: str, running: bool, name: str, log: Path, timeout: float) -> RuntimeError:
    why = f"did not answer {url} within {timeout:.0f} s" if running else "exited during start-up"
    return RuntimeError(f"{name} {why}; see {log}:\n" + (log.read_text(errors="replace")[-2000:] if log.exists()
                                                         else ""))


@dataclass(frozen=True)
class Awaited:
    """A server being started: the URL that answers 200 once it is up, its process, its name and its log."""

    url: str
    proc: subprocess.Popen  # polled, not signalled: a child that exited is reaped (os.kill(pid, 0) sees a zombie)
    name: str
    log: Path


def wait_all_healthy(servers: list[Awaited], timeout: float) -> None:
    """Return once every server answers; RuntimeError (the log's tail) as soon as one exits, or after ``timeout``."""
    deadline = time.monotonic() + timeout
    waiting = list(servers)
    while waiting:
        for server in list(waiting):
            if healthy(server.url):
                waiting.remove(server)
            elif server.proc.poll() is not None or time.monotonic() >= deadline:
                raise _gave_up(server.url, server.proc.poll() is None, server.name, server.log, timeout)
        if waiting:
            time.sleep(0.5)


def start(project: Path, prefect_port: int = 4200, mlflow_port: int = 5000, worker: bool = True,
          timeout: float = 180.0, host: str = "127.0.0.1", prefect_toml: bool = True,
          stores: Stores = Stores()) -> dict[str, str]:
    """Start the servers (and a worker for pool ``stsreg-process``) unless already running; returns their URLs.

    ``host``: the address they listen on; ``0.0.0.0`` lets workers on other machines reach them (the URLs then name
    this machine by its host name). MLflow proxies artifacts, so a worker needs only the two URLs. ``prefect_toml``:
    write the project's ``prefect.toml`` for the ``prefect`` command typed in it. ``stores``: where their state lives.
    Raises ``RuntimeError`` (nothing left running) when a port is taken, a store cannot be opened
    (:class:`~stsreg.infra.postgres.DatabaseError`, one line) or a server does not come up."""
    layout = Layout(project.resolve())
    current = status(layout.project)
    if current.get("running"):
        return current
    stop(layout.project)  # clear half-started leftovers
    check_ports(host, {"Prefect": prefect_port, "MLflow": mlflow_port})
    env = server_env(layout)
    backend, artifacts = stores.mlflow_backend(layout.project), stores.mlflow_artifacts(layout.project)
    stores.prepare(layout.project, env)
    env.update(stores.prefect_env())
    (layout.project / "mlflow").mkdir(exist_ok=True)
    name = socket.getfqdn() if host in ("0.0.0.0", "::") else host
    urls = {"prefect": f"http://{name}:{prefect_port}", "mlflow": f"http://{name}:{mlflow_port}"}
    urls["prefect_api"] = urls["prefect"] + "/api"
    urls["database"] = stores.described()
    layout.state.mkdir(parents=True, exist_ok=True)
    layout.urls_file.write_text(json.dumps(urls, indent=2))  # before anything waits: status sees a start under way
    try:
        mlflow = _spawn(layout, "mlflow", [venv_bin("mlflow"), "server", "--host", host, "--port", str(mlflow_port),
                                               "--backend-store-uri", backend, "--serve-artifacts",
                                               "--artifacts-destination", artifacts,
                                               "--workers", "1"], env)
        # the UI calls the API at this URL: without it, a server on another port than 4200 shows a UI that cannot
        # reach its own API ("Can't connect to Server API")
        ui = {"PREFECT_UI_API_URL": urls["prefect_api"]} if "PREFECT_UI_API_URL" not in env else {}
        prefect = _spawn(layout, "prefect", [venv_bin("prefect"), "server", "start", "--host", host, "--port",
                                                 str(prefect_port), "--analytics-off"], {**env, **ui})
        # both at once: a server that exits is reported as soon as it does, not after the other has come up
        wait_all_healthy([Awaited(urls["prefect_api"] + "/health", prefect, "prefect server",
                                  layout.log_file("prefect")),
                          Awaited(urls["mlflow"] + "/health", mlflow, "mlflow server", layout.log_file("mlflow"))],
                         timeout)
        label_experiments(urls["mlflow"])
        if worker:
            wenv = {"PREFECT_FLOWS_HEARTBEAT_FREQUENCY": str(HEARTBEAT_S), **env,
                    "PREFECT_API_URL": urls["prefect_api"], "MLFLOW_TRACKING_URI": urls["mlflow"]}
            _spawn(layout, "worker", [venv_bin("prefect"), "worker", "start", "--pool", POOL, "--type", "process"],
                   wenv)
    except BaseException:
        stop(layout.project)  # a failed (or interrupted) start leaves nothing running
        raise
    if prefect_toml:
        urls["prefect_toml"] = prefect_project.write(project, urls["prefect_api"])
    layout.urls_file.write_text(json.dumps(urls, indent=2))
    return {**urls, "running": True}


def _recorded(layout: Layout, timeout: float = 1.0) -> tuple[dict, bool]:
    """(URLs written by :func:`start`, or {} — whether both servers answer their health checks)."""
    if not layout.urls_file.exists():
        return {}, False
    urls = json.loads(layout.urls_file.read_text())
    return urls, healthy(urls["prefect_api"] + "/health", timeout) and healthy(urls["mlflow"] + "/health", timeout)


def status(project: Path) -> dict:
    """What runs, checked, not remembered: each process (``prefect``, ``mlflow``, ``worker``) with its pid and whether
    it lives, each server's health check, and ``running`` only when both servers answer."""
    layout = Layout(project.resolve())
    urls = json.loads(layout.urls_file.read_text()) if layout.urls_file.exists() else {}
    procs = {}
    for name in PROCESSES:
        pid_file = layout.pid_file(name)
        pid = int(pid_file.read_text()) if pid_file.exists() else None
        procs[name] = {"pid": pid, "alive": bool(pid and alive(pid))}
    if not urls:
        return {"running": False, "processes": procs}
    health = {"prefect": healthy(urls["prefect_api"] + "/health"), "mlflow": healthy(urls["mlflow"] + "/health")}
    return {**{k: v for k, v in urls.items() if k != "prefect_toml"}, "running": all(health.values()),
            "healthy": health,
            "worker": procs["worker"]["alive"], "processes": procs}


def stop(project: Path, timeout: float = 30.0) -> list[str]:
    """Stop the worker first (a worker outliving its server hangs), then Prefect, then MLflow; returns what stopped."""
    layout = Layout(project.resolve())
    stopped = []
    for name in PROCESSES:
        pid_file = layout.pid_file(name)
        if not pid_file.exists():
            continue
        pid = int(pid_file.read_text())
        if alive(pid):
            try:
                os.killpg(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            deadline = time.monotonic() + timeout
            while alive(pid) and time.monotonic() < deadline:
                time.sleep(0.2)
                try:
                    os.waitpid(pid, os.WNOHANG)  # reap it when we are its parent (tests)
                except ChildProcessError:
                    pass
            if alive(pid):
                os.killpg(pid, signal.SIGKILL)
            stopped.append(name)
        pid_file.unlink(missing_ok=True)  # a second stop running at once removed it first
    prefect_project.remove(project)
    layout.urls_file.unlink(missing_ok=True)
    return stopped


def use_running(project: Path = Path(".")) -> bool:
    """Point ``PREFECT_API_URL`` / ``MLFLOW_TRACKING_URI`` at the project's servers when they answer (variables
    already set win; ``STSREG_USE_SERVERS=0`` disables). Returns whether the servers are used.

    When they are down but the project's ``prefect.toml`` still names their server (servers killed without ``stop``),
    this process runs Prefect ephemeral instead of calling a server that no longer answers."""
    if os.environ.get("STSREG_USE_SERVERS", "1") == "0":
        return False
    urls, up = _recorded(Layout(project.resolve()), timeout=0.5)
    if not up:
        if "PREFECT_API_URL" not in os.environ and prefect_project.written_by_us(project):
            os.environ["PREFECT_API_URL"] = ""  # empty: no server, Prefect runs ephemeral
        return False
    os.environ.setdefault("PREFECT_API_URL", urls["prefect_api"])
    os.environ.setdefault("MLFLOW_TRACKING_URI", urls["mlflow"])
    return True

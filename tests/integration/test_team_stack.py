"""The team's stack, real: MLflow and Prefect on PostgreSQL, artifacts through the MLflow server, the DVC remote over
SSH, and three hosts that share nothing but those services and a git origin.

- PostgreSQL comes from `stsreg postgres start` (Debian's package: initdb, pg_ctl); sshd from openssh-server, on a
  loopback port with keys the test makes. `.ci/run` installs both; elsewhere these tests skip without them.
- Host A (its own clone and HOME): `stsreg servers start --database URL`, `stsreg deploy`, `stsreg data add`.
- Host B (its own folder and HOME, holding the SSH key): `stsreg worker --pool stsreg-gpu`; the stage-2 flow run
  clones the origin at A's commit and pulls its inputs from the SSH remote.
- Host C (an empty folder, its own HOME): `stsreg serve` of models:/sts-regression@champion through the MLflow server
  only; it never sees a path of A.

The fail-fast cases (a missing driver, a refused connection, a wrong password, a missing database, a worker pointed
at an API that does not answer) take seconds and name their cause in one line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from tests.conftest import free_port
from tests.helpers.project import GIT_IDENTITY, declare_reviews, scored_reviews, tiny_project
from tests.helpers.services import Postgres, SshServer, needs, start_postgres, start_sshd, stop_group, stsreg

GPU_POOL = "stsreg-gpu"
pytestmark = needs("postgres", "sshd")


def _host_env(home: Path, **extra: str) -> dict[str, str]:
    """A host's environment: this machine's, without any MLflow, Prefect or stsreg variable, its own HOME."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "PREFECT_", "STSREG_"))}
    home.mkdir(parents=True, exist_ok=True)
    return {**env, "HOME": str(home), "PATH": f"{os.path.dirname(sys.executable)}{os.pathsep}{env['PATH']}",
            "OMP_NUM_THREADS": "1", **GIT_IDENTITY, **extra}


def _run(cmd: list, cwd: Path, env: dict, timeout: float = 300) -> subprocess.CompletedProcess:
    done = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, (cmd, done.stdout[-2000:], done.stderr[-3000:])
    return done


@pytest.fixture(scope="module")
def postgres():
    server = start_postgres()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def sshd():
    server = start_sshd()
    yield server
    server.stop()


@dataclass
class Team:
    """The three hosts and the services they share."""

    root: Path
    postgres: Postgres
    sshd: SshServer
    origin: Path
    urls: dict = field(default_factory=dict)
    procs: list = field(default_factory=list)

    def host(self, name: str) -> Path:
        return self.root / f"host-{name}"

    def env(self, name: str, **extra: str) -> dict[str, str]:
        return _host_env(self.root / f"home-{name}", **extra)

    def spawn(self, name: str, cmd: list, **extra: str) -> subprocess.Popen:
        log = open(self.root / f"{name}-{len(self.procs)}.log", "w")
        proc = subprocess.Popen([str(c) for c in cmd], cwd=self.host(name), env=self.env(name, **extra),
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        proc.log = Path(log.name)
        self.procs.append(proc)
        return proc

    def mlflow(self):
        from mlflow.tracking import MlflowClient

        return MlflowClient(tracking_uri=self.urls["mlflow"])

    def retrain(self) -> object:
        """The weekly deployment run through the Prefect API, as the schedule or `prefect deployment run` starts it."""
        from prefect.deployments import run_deployment
        from prefect.settings import PREFECT_API_URL, temporary_settings

        with temporary_settings(updates={PREFECT_API_URL: self.urls["prefect_api"]}):
            return run_deployment("stsreg-retrain/weekly", timeout=900)


@pytest.fixture(scope="module")
def team(tiny_backbone, tmp_path_factory, postgres, sshd):
    """Origin, host A with the servers on PostgreSQL and the deployments, host B's GPU-pool worker online."""
    with pytest.MonkeyPatch.context() as mp:  # this process's dvc / git calls: the venv's, no server variables
        for name in [k for k in os.environ if k.startswith(("MLFLOW_", "PREFECT_API"))]:
            mp.delenv(name)
        mp.setenv("PATH", f"{os.path.dirname(sys.executable)}{os.pathsep}{os.environ['PATH']}")
        yield from _team(tiny_backbone, tmp_path_factory.mktemp("team"), postgres, sshd)


def _team(tiny_backbone, root, postgres, sshd):
    seed = declare_reviews(tiny_project(root / "seed", tiny_backbone, git=True), gate=["reviews"])
    params = yaml.safe_load((seed / "params.yaml").read_text())
    params["schedule"].update(gpu_pool=GPU_POOL, repo_url=str(root / "origin.git"))
    # every version passes the gate: these tests are about where things run and what they share, not about
    # whether a tiny random encoder improved
    params["promote"].update(margin=-100.0, alpha=1.0)
    (seed / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    env = _host_env(root / "home-seed")
    _run(["dvc", "remote", "add", "-d", "shared", sshd.url(root / "dvc-remote")], seed, env)
    _run(["git", "commit", "-qam", "the team's remote and pools"], seed, env)
    _run(["git", "clone", "-q", "--bare", seed, root / "origin.git"], root, env)
    t = Team(root, postgres, sshd, root / "origin.git")
    for name in "abc":
        sshd.give_key(root / f"home-{name}") if name != "c" else (root / "home-c").mkdir()
    _run(["git", "clone", "-q", t.origin, t.host("a")], root, t.env("a"))
    t.host("b").mkdir()
    t.host("c").mkdir()
    started = stsreg("servers", "start", "--database", postgres.url, "--prefect-port", free_port(), "--mlflow-port",
                     free_port(), cwd=t.host("a"), env=t.env("a", PREFECT_WORKER_QUERY_SECONDS="2"), timeout=300)
    assert started.returncode == 0, started.stderr[-3000:]
    t.urls = json.loads((t.host("a") / ".stsreg/servers.json").read_text())
    try:
        _run([Path(sys.executable).with_name("stsreg"), "deploy"], t.host("a"), t.env("a"))
        worker = t.spawn("b", [Path(sys.executable).with_name("stsreg"), "worker", "--pool", GPU_POOL, "--api",
                               t.urls["prefect_api"]], STSREG_WORKDIR=str(t.host("b")),
                         PREFECT_WORKER_QUERY_SECONDS="2")
        _wait_for_worker(t, worker)
        yield t
    finally:
        for proc in t.procs:
            stop_group(proc)
        stsreg("servers", "stop", cwd=t.host("a"), env=t.env("a"))


def _wait_for_worker(team: Team, proc, timeout: float = 120) -> None:
    from prefect import get_client
    from prefect.client.schemas.objects import WorkerStatus
    from prefect.settings import PREFECT_API_URL, temporary_settings
    from prefect.utilities.asyncutils import run_coro_as_sync

    async def online():
        async with get_client() as client:
            return any(w.status == WorkerStatus.ONLINE for w in await client.read_workers_for_work_pool(GPU_POOL))

    deadline = time.time() + timeout
    with temporary_settings(updates={PREFECT_API_URL: team.urls["prefect_api"]}):
        while not run_coro_as_sync(online()):
            assert proc.poll() is None and time.time() < deadline, proc.log.read_text()[-3000:]
            time.sleep(1)


def _champion(team: Team) -> int:
    """The champion's version, training it through the deployment first where there is none yet."""
    mlflow = team.mlflow()
    if not mlflow.search_model_versions("name = 'sts-regression'"):
        run = team.retrain()
        assert run.state.is_completed(), (run.state, team.procs[0].log.read_text()[-3000:])
    return int(mlflow.get_model_version_by_alias("sts-regression", "champion").version)


def _ready(url: str) -> dict:
    with urllib.request.urlopen(url + "/ready", timeout=5) as r:
        return json.loads(r.read())


def _serve_on_c(team: Team) -> str:
    """Host C: `stsreg serve` of the champion alias through the MLflow server, following it every second."""
    port = free_port()
    proc = team.spawn("c", [Path(sys.executable).with_name("stsreg"), "serve", "--model-uri",
                            "models:/sts-regression@champion", "--port", port, "--follow-s", "1"],
                      MLFLOW_TRACKING_URI=team.urls["mlflow"])
    url = f"http://127.0.0.1:{port}"
    from stsreg.infra.local_servers import wait_healthy

    wait_healthy(url + "/ready", lambda: proc.poll() is None, "stsreg serve on host C", proc.log, 300)
    return url


def _similarity(url: str) -> float:
    body = json.dumps({"sentence1": "a man plays a guitar", "sentence2": "someone plays music"}).encode()
    req = urllib.request.Request(url + "/similarity", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        assert r.status == 200
        return r.read()


@pytest.mark.timeout(1500)
def test_a_retrain_on_three_hosts_registers_through_the_server_on_postgres_and_host_c_serves_it(team):
    """A retrain on A runs stage 2 on B (cloned from the origin, inputs from the SSH remote); its version is
    registered through the MLflow server (artifacts at mlflow-artifacts:/, rows in PostgreSQL) and served on C."""
    import psycopg2
    from prefect import get_client
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterName
    from prefect.settings import PREFECT_API_URL, temporary_settings
    from prefect.utilities.asyncutils import run_coro_as_sync

    version = _champion(team)
    report = json.loads((team.host("a") / "reports/retrain/last_run.json").read_text())
    assert report["stage2_remote"]["clone"].startswith(str(team.host("b"))) and report["pushed"]

    async def stage2_runs():
        async with get_client() as client:
            return await client.read_flow_runs(deployment_filter=DeploymentFilter(
                name=DeploymentFilterName(any_=["gpu"])))

    with temporary_settings(updates={PREFECT_API_URL: team.urls["prefect_api"]}):
        remote = run_coro_as_sync(stage2_runs())
    assert remote and all(r.work_pool_name == GPU_POOL for r in remote) and remote[0].state.is_completed()
    # the registered version's files went through the server: no host's path in its source
    mv = team.mlflow().get_model_version("sts-regression", str(version))
    run = team.mlflow().get_run(mv.run_id)
    assert run.info.artifact_uri.startswith("mlflow-artifacts:/"), run.info.artifact_uri
    # both servers keep their rows in PostgreSQL
    base = team.postgres.url.rsplit("/", 1)[0]
    with psycopg2.connect(f"{base}/stsreg_mlflow") as conn, conn.cursor() as cur:
        cur.execute("SELECT count(*) FROM model_versions WHERE name = 'sts-regression'")
        assert cur.fetchone()[0] >= 1
    with psycopg2.connect(f"{base}/stsreg_prefect") as conn, conn.cursor() as cur:
        cur.execute("SELECT count(*) FROM flow_run WHERE deployment_id IS NOT NULL")
        assert cur.fetchone()[0] >= 2  # the retrain and its stage-2 run
    # host C serves the champion from the MLflow server alone
    url = _serve_on_c(team)
    assert _ready(url)["version"] == str(version)
    _similarity(url)
    assert not (team.host("c") / "mlflow").exists() and str(team.host("a")) not in (team.procs[-1].log.read_text())


@pytest.mark.slow  # two retrains through the trigger, ~6 min
@pytest.mark.timeout(2400)
def test_an_add_on_a_retrains_on_b_and_c_serves_the_new_champion_without_a_failed_request(team):
    """The loop across hosts: `stsreg data add` on A -> the triggered retrain -> stage 2 on B -> evaluate, register,
    gate -> host C, following @champion, answers with the new version; a client polling C all along never fails."""
    first = _champion(team)
    url = _serve_on_c(team)
    failures, answered, done = [], [], threading.Event()

    def client():
        while not done.is_set():
            try:
                _similarity(url)
                answered.append(_ready(url)["version"])
            except Exception as exc:  # noqa: BLE001 — every failure is the finding
                failures.append(repr(exc))
            time.sleep(0.2)

    polling = threading.Thread(target=client, daemon=True)
    polling.start()
    try:
        before = _add(team, 7, rows=60)
        deadline = time.monotonic() + 1500
        while time.monotonic() < deadline:
            champion = team.mlflow().get_model_version_by_alias("sts-regression", "champion").version
            # the client's own last answer too: one it asked for before the swap may come back after this check
            if int(champion) > first and _ready(url)["version"] == champion and answered[-1:] == [champion]:
                break
            time.sleep(3)
        else:
            pytest.fail("host C never served a new champion")
    finally:
        done.set()
        polling.join(timeout=60)
    assert not failures, failures[:5]
    assert answered[0] == str(first) and answered[-1] == champion
    assert _triggered(team, before).state.is_completed()  # the flow's report comes after the swap it waits for
    report = json.loads((team.host("a") / "reports/retrain/last_run.json").read_text())
    assert report["tables_changed"] == {"reviews": {"added": 60, "removed": 0}}
    assert report["stage2_remote"]["clone"].startswith(str(team.host("b")))


# -- the SSH remote between hosts -------------------------------------------------------------------------------------

def test_dvc_push_and_pull_over_ssh_between_hosts_with_their_own_keys(tmp_path, sshd):
    """Host A pushes a tracked file to the SSH remote; host B (another clone, another HOME holding the key) pulls it.
    Nothing names a key path: each host's ~/.ssh holds its identity, as an ops set-up leaves it."""
    a, b = tmp_path / "a", tmp_path / "b"
    env_a, env_b = _host_env(tmp_path / "home-a"), _host_env(tmp_path / "home-b")
    sshd.give_key(tmp_path / "home-a")
    sshd.give_key(tmp_path / "home-b")
    a.mkdir()
    for cmd in (["git", "init", "-q", "-b", "main"], ["dvc", "init", "-q"]):
        _run(cmd, a, env_a)
    (a / "table.csv").write_text("sentence1,sentence2,score\na,b,1\n")
    _run(["dvc", "add", "-q", "table.csv"], a, env_a)
    _run(["dvc", "remote", "add", "-d", "shared", sshd.url(tmp_path / "remote")], a, env_a)
    _run(["git", "add", "-A"], a, env_a)
    _run(["git", "commit", "-qm", "a table on the ssh remote"], a, env_a)
    _run(["dvc", "push"], a, env_a)
    _run(["git", "clone", "-q", a, b], tmp_path, env_b)
    _run(["dvc", "pull"], b, env_b)
    assert (b / "table.csv").read_text() == (a / "table.csv").read_text()
    without_key = _host_env(tmp_path / "home-nokey")
    refused = subprocess.run(["dvc", "pull", "--force"], cwd=b, env=without_key, capture_output=True, text=True)
    assert refused.returncode != 0  # the remote is the key's, not everyone's


# -- PostgreSQL started by the project, and the fail-fast cases -------------------------------------------------------

def test_postgres_start_prints_a_url_a_client_connects_with_and_is_idempotent(postgres):
    import psycopg2

    with psycopg2.connect(postgres.url, connect_timeout=5) as conn, conn.cursor() as cur:
        cur.execute("SELECT current_user, current_database()")
        assert cur.fetchone() == ("stsreg", "stsreg")
    again = stsreg("postgres", "start", "--dir", postgres.folder, cwd=postgres.folder)
    assert again.returncode == 0 and postgres.url in again.stdout  # already running: the same URL
    assert stsreg("postgres", "url", "--dir", postgres.folder, cwd=postgres.folder).stdout.strip() == postgres.url
    assert stsreg("postgres", "status", "--dir", postgres.folder, cwd=postgres.folder).returncode == 0


def _bad_urls(postgres: Postgres) -> dict[str, tuple[str, str]]:
    host = postgres.url.split("@", 1)[1].split("/", 1)[0]
    return {"wrong password": (f"postgresql://stsreg:wrong@{host}/stsreg", "wrong password"),
            "refused": (f"postgresql://stsreg:x@127.0.0.1:{free_port()}/stsreg", "refused the connection"),
            "no such database": (postgres.url.rsplit("/", 1)[0] + "/nosuch", 'database "nosuch" does not exist')}


@pytest.mark.parametrize("case", ["wrong password", "refused", "no such database", "missing driver"])
def test_servers_on_a_database_they_cannot_use_fail_in_seconds_naming_the_cause(case, postgres, tmp_path):
    env = _host_env(tmp_path / "home")
    if case == "missing driver":  # the environment the issue met: no psycopg2 importable
        shadow = tmp_path / "shadow" / "psycopg2"
        shadow.mkdir(parents=True)
        (shadow / "__init__.py").write_text("raise ImportError(\"No module named 'psycopg2'\")\n")
        url, cause, env["PYTHONPATH"] = postgres.url, "no module psycopg2", str(tmp_path / "shadow")
    else:
        url, cause = _bad_urls(postgres)[case]
    started = time.monotonic()
    run = stsreg("servers", "start", "--database", url, "--prefect-port", free_port(), "--mlflow-port", free_port(),
                 "--no-prefect-toml", cwd=tmp_path, env=env, timeout=60)
    took = time.monotonic() - started
    assert run.returncode == 1 and took < 15, (took, run.stderr)
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and cause in lines[0], run.stderr
    assert "wrong@" not in run.stderr and postgres.url.split("@")[0] not in run.stderr  # no password printed
    assert not (tmp_path / ".stsreg/servers.json").exists()
    assert not (tmp_path / ".stsreg/run").exists() or not any((tmp_path / ".stsreg/run").iterdir())


def test_a_worker_pointed_at_an_api_that_does_not_answer_says_so_in_seconds(tmp_path):
    started = time.monotonic()
    run = stsreg("worker", "--pool", GPU_POOL, "--api", f"http://127.0.0.1:{free_port()}/api", "--check-timeout",
                 "3", cwd=tmp_path, env=_host_env(tmp_path / "home"), timeout=60)
    assert run.returncode == 1 and time.monotonic() - started < 15, run.stderr
    assert "did not answer its health check within 3 s" in run.stderr and len(run.stderr.strip().splitlines()) == 1


# -- the shared services' faults ---------------------------------------------------------------------------------------

_RACER = """
import sys, time
from pathlib import Path
from stsreg.infra.config import PromoteParams
from stsreg.product import registry
uri, name, version, go = sys.argv[1:]
while not Path(go).exists():  # imported and connected: both start the gate at the same moment
    time.sleep(0.01)
gate = PromoteParams(metrics=("avg7",), margin=-100.0, alpha=1.0)  # every version passes: the order is the question
print(registry.promote(gate, n_resamples=50, name=name, uri=uri, version=int(version))["reason"])
"""


def test_two_promotions_racing_are_judged_one_after_the_other(team, tmp_path):
    """Two hosts' promote stages start their gates at the same moment against one registry: exactly one champion,
    and both verdicts recorded, the second judged against the first's outcome (not both against the old champion,
    as the alias read before the lock would have them)."""
    import re

    import numpy as np

    from tests.helpers.gate_tables import predictions, registered_version

    c, name = team.mlflow(), "race"
    rng = np.random.default_rng(0)
    from stsreg.product.data.catalogue import EVAL_TASKS

    gold = {t: rng.uniform(0, 5, 200) for t in EVAL_TASKS}
    versions = [registered_version(c, name, predictions(rng, {t: noise for t in EVAL_TASKS}, gold), tmp_path)
                for noise in (1.5, 0.4, 0.4)]  # two challengers far better than the champion, alike to each other
    c.set_registered_model_alias(name, "champion", versions[0])
    (tmp_path / "racer.py").write_text(_RACER)
    env = {**os.environ, "PREFECT_API_URL": team.urls["prefect_api"], "STSREG_USE_SERVERS": "0"}
    racers = [subprocess.Popen([sys.executable, str(tmp_path / "racer.py"), team.urls["mlflow"], name, v,
                                str(tmp_path / "go")], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True) for v in versions[1:]]
    time.sleep(15)  # both imported and waiting
    (tmp_path / "go").touch()
    for racer in racers:
        out, err = racer.communicate(timeout=300)
        assert racer.returncode == 0, err[-3000:]
    tags = {v: c.get_model_version(name, v).tags for v in versions[1:]}
    against = {v: re.search(r"champion v(\d+)", tags[v]["promotion.reason"])[1] for v in versions[1:]}
    first = next(v for v in versions[1:] if against[v] == versions[0])
    second = next(v for v in versions[1:] if v != first)
    assert tags[first]["promotion.decision"] == "promoted"  # far better than v1
    assert against[second] == first, against  # judged after the first had moved the alias, not both against v1
    champion = c.get_model_version_by_alias(name, "champion").version
    assert champion == (second if tags[second]["promotion.decision"] == "promoted" else first)


def _retrain_runs(team: Team) -> list:
    from prefect import get_client
    from prefect.client.schemas.filters import FlowFilter, FlowFilterName
    from prefect.settings import PREFECT_API_URL, temporary_settings
    from prefect.utilities.asyncutils import run_coro_as_sync

    async def read():
        async with get_client() as client:
            return await client.read_flow_runs(flow_filter=FlowFilter(name=FlowFilterName(any_=["stsreg-retrain"])))

    with temporary_settings(updates={PREFECT_API_URL: team.urls["prefect_api"]}):
        return run_coro_as_sync(read())


def _add(team: Team, seed: int, rows: int = 40) -> set:
    """`stsreg data add` of new rows on host A (its event triggers a retrain); the retrain runs before it."""
    before = {r.id for r in _retrain_runs(team)}
    scored_reviews(rows, seed).to_csv(team.root / f"new-{seed}.csv", index=False)
    added = stsreg("data", "add", team.root / f"new-{seed}.csv", "--table", "reviews", cwd=team.host("a"),
                   env=team.env("a"), timeout=300)
    assert added.returncode == 0 and "event stsreg.data.changed sent" in added.stdout, added.stderr[-3000:]
    return before


def _triggered(team: Team, before: set, state: str = "final", timeout: float = 1200):
    """The retrain the add triggered, once it is running (``state="running"``) or has ended."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        runs = [r for r in _retrain_runs(team) if r.id not in before and r.state]
        done = [r for r in runs if (r.state.is_final() if state == "final" else r.state.is_running())]
        if done:
            return done[0]
        time.sleep(2)
    pytest.fail(f"no triggered retrain reached {state}")


def _registry_whole(team: Team) -> None:
    """No version holds an alias without its model files (MLmodel and the weights' folder) in the store."""
    c = team.mlflow()
    for mv in c.search_model_versions("name = 'sts-regression'"):
        if mv.aliases:
            files = {f.path for f in c.list_artifacts(mv.run_id, "model")}
            assert "model/MLmodel" in files and "model/artifacts" in files, (mv.version, mv.aliases, files)


@pytest.mark.slow  # a retrain and its rerun, ~5 min
@pytest.mark.timeout(2400)
def test_postgres_restarted_during_a_retrain_leaves_nothing_half_registered(team):
    """PostgreSQL restarted (pg_ctl restart) while a retrain runs: it finishes, or fails saying why and a rerun
    finishes; no version holds an alias without its files."""
    from stsreg.infra.postgres import LocalPostgres

    _champion(team)
    before = _add(team, 11)
    _triggered(team, before, "running")
    time.sleep(20)  # inside the stages: the servers hold connections to the database
    LocalPostgres.at(team.postgres.folder).restart()
    run = _triggered(team, before)
    if not run.state.is_completed():
        assert run.state.message, run.state  # a failure says why
        rerun = team.retrain()
        assert rerun.state.is_completed(), rerun.state
    _registry_whole(team)


@pytest.mark.slow  # two retrains, ~6 min
@pytest.mark.timeout(2400)
def test_the_mlflow_server_killed_during_a_registration_then_the_next_registration_works(team):
    """SIGKILL to the MLflow server in the middle of a registration's writes, then the server started again as an
    administrator would (the same command line): the registration rides it out on its retries or fails saying why (and
    its rerun registers); no version holds an alias without its files; the next retrain registers and promotes."""
    import signal

    _champion(team)
    log = team.host("a") / ".stsreg/logs/worker.log"
    seen = len(log.read_bytes())  # this retrain's lines come after
    before = _add(team, 13)
    # the registration's writes come right after the backends are measured: the version's files uploaded through
    # the server, the version created, its alias set (~1 s on the tiny model)
    uploading = "Task run 'dvc repro register' - INFO stsreg.product.serving.export: backend auto"
    deadline = time.monotonic() + 900
    while uploading not in log.read_bytes()[seen:].decode(errors="replace"):
        assert time.monotonic() < deadline, "the register stage never reached its writes"
        time.sleep(0.05)
    pid_file = team.host("a") / ".stsreg/run/mlflow.pid"
    pid = int(pid_file.read_text())
    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")[:-1]
    environ = dict(v.split("=", 1) for v in Path(f"/proc/{pid}/environ").read_bytes().decode().split("\0") if v)
    os.killpg(pid, signal.SIGKILL)
    time.sleep(3)
    restarted = subprocess.Popen(cmdline, cwd=team.host("a"), env=environ, start_new_session=True,
                                 stdout=open(team.host("a") / ".stsreg/logs/mlflow.log", "ab"),
                                 stderr=subprocess.STDOUT)
    pid_file.write_text(str(restarted.pid))  # `stsreg servers stop` stops this one
    run = _triggered(team, before)
    _registry_whole(team)
    if not run.state.is_completed():  # the registration failed: it said why, and a rerun registers
        assert run.state.message, run.state
        rerun = team.retrain()
        assert rerun.state.is_completed(), rerun.state
        _registry_whole(team)
    next_run = _triggered(team, _add(team, 17))
    assert next_run.state.is_completed(), next_run.state
    _registry_whole(team)
    versions = team.mlflow().search_model_versions("name = 'sts-regression'")
    champion = team.mlflow().get_model_version_by_alias("sts-regression", "champion").version
    assert int(champion) == max(int(mv.version) for mv in versions)

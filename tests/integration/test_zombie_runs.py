"""A retrain whose worker died with it (kill -9, a reboot) used to stay Running for ever, and the retrain
deployment's concurrency limit of 1 then held every later triggered retrain in Scheduled ("Aborted submission ...
non-pending state 'SCHEDULED'", over and over). Real servers (`stsreg servers start`), a real process worker sending
heartbeats, `stsreg deploy`'s automation: the dead run is marked Crashed and the next run of the deployment runs; on
the embedded SQLite and on a team's PostgreSQL."""

from __future__ import annotations

import os
import signal
import time

import pytest

from tests.conftest import free_port

pytestmark = pytest.mark.slow

FLOW = '''
import time
from prefect import flow

@flow(name="sleeper")
def sleeper(seconds: float = 600.0):
    time.sleep(seconds)
'''


def _processes_of(run_id) -> list[int]:
    """The processes running flow run ``run_id`` (the engine's environment names it)."""
    import psutil

    found = []
    for proc in psutil.process_iter(["pid"]):
        try:
            if proc.environ().get("PREFECT__FLOW_RUN_ID") == str(run_id):
                found.append(proc.pid)
        except (psutil.AccessDenied, psutil.NoSuchProcess, psutil.ZombieProcess):
            pass
    return found


def _state(run_id):
    from prefect import get_client
    from prefect.utilities.asyncutils import run_coro_as_sync

    async def read():
        async with get_client() as client:
            return (await client.read_flow_run(run_id)).state

    return run_coro_as_sync(read())


@pytest.fixture(params=["sqlite", "postgres"])
def stores(request):
    """The servers' stores: the embedded SQLite, or PostgreSQL from `stsreg postgres start` (a team's)."""
    from stsreg.infra.local_servers import Stores
    from tests.helpers.services import require, start_postgres

    if request.param == "sqlite":
        yield Stores()
        return
    require("postgres")
    server = start_postgres()
    yield Stores(database=server.url)
    server.stop()


def test_a_flow_run_whose_worker_died_is_crashed_and_frees_its_deployment(tmp_path, monkeypatch, stores):
    from prefect import Flow
    from prefect.deployments import run_deployment
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from pipelines.product.deploy import ZOMBIES, ensure_process_pool, ensure_zombie_automation
    from stsreg.infra import local_servers

    (tmp_path / "sleeper.py").write_text(FLOW)
    monkeypatch.setenv("PREFECT_FLOWS_HEARTBEAT_FREQUENCY", "31")  # Prefect's least: the test waits ~1.5 min
    urls = local_servers.start(tmp_path, free_port(), free_port(), timeout=240, prefect_toml=False, stores=stores)
    try:
        with temporary_settings(updates={PREFECT_API_URL: urls["prefect_api"]}):
            assert ensure_zombie_automation(31) == ensure_zombie_automation(31) == ZOMBIES  # once
            ensure_process_pool(local_servers.POOL)
            Flow.from_source(str(tmp_path), "sleeper.py:sleeper").deploy(
                name="once", work_pool_name=local_servers.POOL, build=False, push=False, concurrency_limit=1,
                print_next_steps=False, ignore_warnings=True)
            run = run_deployment("sleeper/once", timeout=0)
            deadline = time.monotonic() + 180
            while not _state(run.id).is_running():
                assert time.monotonic() < deadline, _state(run.id)
                time.sleep(1)
            time.sleep(5)  # its first heartbeat is out
            worker = local_servers.status(tmp_path)["processes"]["worker"]["pid"]
            os.killpg(os.getpgid(worker), signal.SIGKILL)  # the worker and the flow run's process, as a reboot does
            for pid in _processes_of(run.id):
                os.kill(pid, signal.SIGKILL)
            waiting = run_deployment("sleeper/once", timeout=0, parameters={"seconds": 0.0})
            deadline = time.monotonic() + 300
            while not (state := _state(run.id)).is_crashed():  # one read a turn: it may crash between two
                assert state.is_running() and time.monotonic() < deadline, state
                time.sleep(3)
            assert "no heartbeat" in (_state(run.id).message or "")
            local_servers.stop(tmp_path)  # a worker again, as after a reboot: the waiting run gets its slot
            ports = [int(urls[name].rsplit(":", 1)[1]) for name in ("prefect", "mlflow")]
            local_servers.start(tmp_path, *ports, timeout=240, prefect_toml=False, stores=stores)
            deadline = time.monotonic() + 300
            while not _state(waiting.id).is_completed():
                assert time.monotonic() < deadline, _state(waiting.id)
                time.sleep(2)
    finally:
        local_servers.stop(tmp_path)

"""`stsreg servers` fails fast and clean: a port in use is refused in seconds naming its holder, a server that does
not come up stops what the start started, and `servers status` reports what really runs."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import pytest

from tests.conftest import free_port


def _stsreg(*args, cwd, env=None, timeout=300):
    exe = os.path.join(os.path.dirname(sys.executable), "stsreg")
    return subprocess.run([exe, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "HOME": str(cwd), **(env or {})})


def test_a_port_in_use_is_refused_at_once_naming_it_and_its_holder(tmp_path):
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        started = time.monotonic()
        run = _stsreg("servers", "start", "--project", str(tmp_path), "--prefect-port", str(port),
                      "--mlflow-port", str(free_port()), cwd=tmp_path)
        took = time.monotonic() - started
    assert run.returncode == 1 and took < 5, (took, run.stderr)
    assert (
        f"port {port} (Prefect) on 127.0.0.1 is in use by python" in run.stderr and f"pid {os.getpid()}" in run.stderr
    )
    status = _stsreg("servers", "status", "--project", str(tmp_path), cwd=tmp_path)
    assert status.returncode == 3 and '"running": false' in status.stdout
    assert not (tmp_path / ".stsreg/run").exists() or not any((tmp_path / ".stsreg/run").iterdir())


@pytest.mark.slow  # ~20 s: MLflow's server exits on its store, Prefect's was starting
def test_a_server_that_does_not_come_up_stops_what_the_start_started(tmp_path):
    """MLflow cannot open its store (a database from a schema it does not know: its server exits at start): the start
    says so as soon as it exits, not after the other server came up or the timeout passed, naming the server and its
    log, and the Prefect server it had started is stopped."""
    import sqlite3

    (tmp_path / "mlflow").mkdir()
    with sqlite3.connect(tmp_path / "mlflow/mlflow.db") as db:
        db.execute("CREATE TABLE alembic_version (version_num VARCHAR(32) PRIMARY KEY)")
        db.execute("INSERT INTO alembic_version VALUES ('ffffffffffff')")
    started = time.monotonic()
    run = _stsreg("servers", "start", "--project", str(tmp_path), "--prefect-port", str(free_port()),
                  "--mlflow-port", str(free_port()), "--no-prefect-toml", "--timeout", "170", cwd=tmp_path)
    took = time.monotonic() - started
    assert run.returncode == 1 and "mlflow server exited during start-up" in run.stderr, run.stderr[-2000:]
    assert "mlflow.log" in run.stderr and "ffffffffffff" in run.stderr and took < 120, took
    status = _stsreg("servers", "status", "--project", str(tmp_path), cwd=tmp_path)
    assert status.returncode == 3 and '"running": false' in status.stdout
    assert '"alive": true' not in status.stdout  # no process left behind
    assert not (tmp_path / ".stsreg/servers.json").exists()


def test_experiments_are_labelled_as_model_training(tmp_path):
    from stsreg.infra import tracking
    from stsreg.infra.mlflow_ui import label_experiments

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    c = tracking.client(uri)
    new = tracking.experiment_id(c, "stsreg")
    assert c.get_experiment(new).tags["mlflow.experimentKind"] == "custom_model_development"
    old = c.create_experiment("made-before", artifact_location=(tmp_path / "a").as_uri())  # an older store's
    assert "mlflow.experimentKind" not in c.get_experiment(old).tags
    label_experiments(uri)
    assert c.get_experiment(old).tags["mlflow.experimentKind"] == "custom_model_development"

"""A ``stsreg`` command ended by ``kill PID`` (SIGTERM to it alone, not its group) ends as SIGTERM does (status -15) and
takes the ephemeral Prefect server it started with it. Prefect stops that server at exit, which SIGTERM's default
skips, and Prefect's own SIGTERM handler during a flow ends the process with the handler it found: the server (a child
process on a port of its own) used to keep running after the command."""

import contextlib
import os
import signal
import subprocess
import sys
import time

from tests.conftest import REPO
from tests.helpers.processes import alive, prefect_servers_of

#: what ``stsreg``'s main leaves in place, then a flow on the ephemeral server that runs until it is stopped
FLOW = """
import signal, sys, time
from prefect import flow
from stsreg import cli

sys.argv = ["stsreg", "preset", "paper"]
cli.main()
assert signal.getsignal(signal.SIGTERM) is cli._end_on_sigterm

@flow(name="sleeper-under-test")
def sleeper():
    print("running", flush=True)
    time.sleep(300)

sleeper()
"""


def test_a_command_sent_sigterm_mid_flow_stops_its_prefect_server(tmp_path):
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "MLFLOW_"))},
           "PREFECT_HOME": str(tmp_path / "prefect"), "PYTHONPATH": str(REPO)}
    log = tmp_path / "run.log"  # a file, not a pipe: a server that outlived the run would hold a pipe open
    run = subprocess.Popen([sys.executable, "-c", FLOW], cwd=tmp_path, env=env, stdout=log.open("w"),
                           stderr=subprocess.STDOUT, start_new_session=True)
    servers: list[int] = []
    try:
        deadline = time.time() + 240  # the ephemeral server starts first
        while "running" not in log.read_text():
            assert run.poll() is None and time.time() < deadline, log.read_text()[-3000:]
            time.sleep(0.2)
        servers = prefect_servers_of(run.pid)
        assert servers, "the flow ran on no ephemeral Prefect server"
        run.send_signal(signal.SIGTERM)  # the command alone, as `kill PID`
        assert run.wait(60) == -signal.SIGTERM, log.read_text()[-3000:]
        deadline = time.time() + 10
        while any(alive(pid) for pid in servers) and time.time() < deadline:
            time.sleep(0.1)
        assert not any(alive(pid) for pid in servers), "the command's Prefect server outlived it"
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
        for pid in servers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

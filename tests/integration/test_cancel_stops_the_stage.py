"""A cancelled retrain stops: the flow run's process is told to stop (SIGTERM, what the worker sends on
`prefect flow-run cancel`) while `dvc repro` runs a long stage, and the stage's processes (dvc, the stage command and
what it started) are gone within seconds, where they used to outlive the run."""

import os
import signal
import subprocess
import sys
import time

#: A stage that starts a child and waits: both write their pid.
LONG = ("import os, subprocess, time; open('stage.pid', 'w').write(str(os.getpid())); "
        "child = subprocess.Popen(['sleep', '300']); open('child.pid', 'w').write(str(child.pid)); time.sleep(300)")
STAGE = f"""stages:
  long:
    cmd: python -c "{LONG}"
    outs:
      - never.txt
"""

RUN = """
import sys
from prefect import flow
from pipelines.product.ops_flow import dvc_repro

@flow(name="retrain-under-test")
def retrain(project: str):
    dvc_repro(project, "long", heartbeat_s=3600)

retrain(sys.argv[1])
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as fh:  # a zombie (exited, not yet reaped) is not running
        return fh.read().split(")")[-1].split()[0] != "Z"


def test_sigterm_to_the_flow_run_stops_dvc_and_the_stage(tmp_path):
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run([sys.executable, "-m", "dvc", "init", "-q"], cwd=tmp_path, check=True)
    (tmp_path / "dvc.yaml").write_text(STAGE)
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "MLFLOW_"))},
           "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]}
    run = subprocess.Popen([sys.executable, "-c", RUN, str(tmp_path)], env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 300  # an ephemeral Prefect server starts first
    while not (tmp_path / "child.pid").is_file():
        assert run.poll() is None and time.time() < deadline, run.stdout.read()[-3000:] if run.stdout else ""
        time.sleep(0.2)
    time.sleep(0.5)
    stage, child = int((tmp_path / "stage.pid").read_text()), int((tmp_path / "child.pid").read_text())
    assert _alive(stage) and _alive(child)
    run.send_signal(signal.SIGTERM)
    run.wait(60)
    deadline = time.time() + 30
    while (_alive(stage) or _alive(child)) and time.time() < deadline:
        time.sleep(0.2)
    assert not _alive(stage) and not _alive(child), "the stage outlived its cancelled run"
    assert run.returncode != 0

"""A cancelled retrain stops: the flow run's process is told to stop (SIGTERM, what the worker sends on
`prefect flow-run cancel`) while `dvc repro` runs a long stage, and the stage's processes (dvc, the stage command and
what it started) are gone within seconds, where they used to outlive the run. The stage's outputs of its last finished
run stay in place (they persist, as every output of the product chain does: DVC deleted models/stage1 and
metrics/stage1.json when the stage started), and the run's log says what was kept."""

import contextlib
import os
import signal
import subprocess
import sys
import time

from tests.helpers.processes import alive, prefect_servers_of

#: A stage that starts a child and waits: both write their pid.
LONG = ("import os, subprocess, time; open('stage.pid', 'w').write(str(os.getpid())); "
        "child = subprocess.Popen(['sleep', '300']); open('child.pid', 'w').write(str(child.pid)); time.sleep(300)")
STAGE = f"""stages:
  long:
    cmd: python -c "{LONG}"
    deps:
      - table.csv
    outs:
      - model:
          persist: true
    metrics:
      - metrics.json:
          cache: false
          persist: true
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


def test_every_output_of_the_product_chain_persists():
    """DVC deletes a stage's outputs when it starts it unless they persist; each stage swaps its outputs in whole
    only when it succeeds, so with `persist` a cancelled or failed stage leaves its last finished run's."""
    from pipelines.product.kept_outputs import outputs
    from pipelines.product.ops_flow import CHAIN
    from tests.conftest import REPO

    for stage in CHAIN[1:]:
        assert all(persists for _, persists in outputs(REPO, stage)), (stage, outputs(REPO, stage))


def test_sigterm_to_the_flow_run_stops_dvc_and_the_stage_and_keeps_its_last_outputs(tmp_path):
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run([sys.executable, "-m", "dvc", "init", "-q"], cwd=tmp_path, check=True)
    (tmp_path / "dvc.yaml").write_text(STAGE)
    (tmp_path / "table.csv").write_text("a,b,1\n")
    (tmp_path / "model").mkdir()
    (tmp_path / "model/weights.bin").write_bytes(b"the last finished run's weights")
    (tmp_path / "metrics.json").write_text('{"dev": 81.5}')
    subprocess.run([sys.executable, "-m", "dvc", "commit", "-f", "-q", "long"], cwd=tmp_path, check=True)
    (tmp_path / "table.csv").write_text("a,b,1\nc,d,2\n")  # new rows: the stage runs again
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "MLFLOW_"))},
           "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]}
    log = tmp_path / "run.log"  # a file, not a pipe: the run's ephemeral Prefect server outlives it (stopped below)
    run = subprocess.Popen([sys.executable, "-c", RUN, str(tmp_path)], env=env, stdout=log.open("w"),
                           stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 300  # an ephemeral Prefect server starts first
    while not (tmp_path / "child.pid").is_file():
        assert run.poll() is None and time.time() < deadline, log.read_text()[-3000:]
        time.sleep(0.2)
    time.sleep(0.5)
    stage, child = int((tmp_path / "stage.pid").read_text()), int((tmp_path / "child.pid").read_text())
    assert alive(stage) and alive(child)
    # the run's ephemeral Prefect server outlives it: Prefect's SIGTERM bridge ends the process with SIGTERM's default,
    # which runs no exit handler (Prefect stops the server at exit); stopped here so that it does not outlive the suite
    servers = prefect_servers_of(run.pid)
    try:
        run.send_signal(signal.SIGTERM)
        run.wait(60)
    finally:
        for pid in servers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
    deadline = time.time() + 30
    while (alive(stage) or alive(child)) and time.time() < deadline:
        time.sleep(0.2)
    assert not alive(stage) and not alive(child), "the stage outlived its cancelled run"
    assert run.returncode != 0
    assert (tmp_path / "model/weights.bin").read_bytes() == b"the last finished run's weights"
    assert (tmp_path / "metrics.json").read_text() == '{"dev": 81.5}'
    said = " ".join(log.read_text().split())
    assert ("`dvc repro long` stopped: stage long stopped before its end: the outputs of its last finished run are "
            "kept (model, metrics.json)") in said, said[-3000:]

"""``stsreg data add`` and a by-hand ``dvc repro`` in one project, each started while the other runs, on real DVC:
neither breaks the other. DVC lets go of its repository lock while a stage's command runs; an add that took it then
made the repro fail at its end (``Unable to acquire lock``, rc 255), and a repro started during an add failed at once.
Here the stage is a small command that holds the pipeline lock as every ``stsreg`` stage does and counts the table's
rows, slowly."""

import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
import yaml

import stsreg.cli
from stsreg.infra.dvc_busy import busy, running_stages
from tests.conftest import REPO

STAGE = textwrap.dedent("""
    import os, sys, time
    from pathlib import Path
    from stsreg.infra.locking import pipeline_lock
    with pipeline_lock(Path("."), announce=True):  # as every stsreg stage command
        rows = Path("data/tables/mine.csv").read_text().splitlines()
        time.sleep(float(os.environ.get("STAGE_SLOW_S", "0")))
        Path("out").mkdir(exist_ok=True)
        Path("out/count.txt").write_text(str(len(rows) - 1))
""")
DVC_YAML = """stages:
  count:
    cmd: python stage.py
    deps: [data/tables/mine.csv, stage.py]
    outs: [out/count.txt]
"""


def _rows(n: int, tag: str) -> str:
    return "".join(f"a man plays {tag} {i},a woman sings {tag} {i},{i % 6}\n" for i in range(n))


def _dvc(project: Path, *args: str, slow_s: float = 0, **kw):
    env = {**os.environ, "STAGE_SLOW_S": str(slow_s), "DVC_NO_ANALYTICS": "1"}
    return subprocess.Popen([sys.executable, "-m", "dvc", *args], cwd=project, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, **kw)


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    (tmp_path / "data/tables").mkdir(parents=True)
    (tmp_path / "data/tables/mine.csv").write_text("sentence1,sentence2,score\n" + _rows(200, "guitar"))
    (tmp_path / "stage.py").write_text(STAGE)
    (tmp_path / "dvc.yaml").write_text(DVC_YAML)
    params = yaml.safe_load((REPO / "params.yaml").read_text(encoding="utf-8"))
    params["prepare"]["sts_tables"].append({"name": "mine", "file": "data/tables/mine.csv", "scale": [0, 5]})
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params), encoding="utf-8")
    subprocess.run([sys.executable, "-m", "dvc", "init", "--no-scm", "-q"], cwd=tmp_path, check=True)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _count(project: Path) -> int:
    return int((project / "out/count.txt").read_text())


def test_an_add_during_a_dvc_repro_waits_for_it_and_the_next_repro_takes_every_row(project, capsys):
    (project / "new.csv").write_text("sentence1,sentence2,score\n" + _rows(10, "piano"))
    repro = _dvc(project, "repro", slow_s=4)
    deadline = time.monotonic() + 60
    while not running_stages(project):  # the stage's command runs: DVC has let go of its repository lock
        assert repro.poll() is None and time.monotonic() < deadline, repro.stdout.read()
        time.sleep(0.05)
    assert busy(project) == f"`dvc repro` (PID {repro.pid}) running a stage"
    assert stsreg.cli.main(["data", "add", "new.csv", "--table", "mine", "--no-wait"]) == 2
    err = capsys.readouterr().err
    assert "`dvc repro` (PID" in err and "running a stage" in err and "(--no-wait): nothing was written" in err
    assert stsreg.cli.main(["data", "add", "new.csv", "--table", "mine"]) == 0
    out, err = capsys.readouterr()
    assert "added 10 rows" in out and "waiting (up to 3600 s; --no-wait refuses at once) for: `dvc repro` (PID" in err
    assert repro.wait(60) == 0, repro.stdout.read()  # the repro ran to its end: rc 0, dvc.lock written
    assert _count(project) == 200  # it read the table before the add
    status = subprocess.run([sys.executable, "-m", "dvc", "status"], cwd=project, text=True, capture_output=True)
    assert "data/tables/mine.csv" in status.stdout  # ... and DVC knows the table has grown since
    assert _dvc(project, "repro").wait(60) == 0 and _count(project) == 210


HOLD_ADD = """
import sys, time
from pathlib import Path
from stsreg.infra.locking import data_write_lock
with data_write_lock(Path(".")):
    print("held", flush=True)
    sys.stdin.readline()  # until the test has seen the stage wait (or has given up on it)
    with open("data/tables/mine.csv", "a") as f:
        f.write(sys.argv[1])
"""


def test_a_dvc_repro_started_during_an_add_waits_for_it_and_reads_the_grown_table(project):
    """An add that takes seconds (a large table read back and checked) while the user types `dvc repro`."""
    add = subprocess.Popen([sys.executable, "-c", HOLD_ADD, _rows(7, "drums")], cwd=project, stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, text=True)
    assert add.stdout.readline().strip() == "held"
    repro = _dvc(project, "repro")
    # The add holds on until the stage has said it waits: how long DVC takes to start is no part of the test.
    give_up = threading.Timer(60, lambda: add.stdin.close())
    give_up.start()
    lines = []
    for line in repro.stdout:
        lines.append(line)
        if "waiting for" in line:
            break
    give_up.cancel()
    if not add.stdin.closed:
        add.stdin.close()  # the add goes on
    out = "".join(lines) + repro.communicate(timeout=60)[0]
    assert repro.returncode == 0, out
    assert "Unable to acquire lock" not in out and "waiting for" in out
    assert add.wait(30) == 0 and _count(project) == 207  # the stage read the table once the add had ended


def test_a_running_stage_holding_the_pipeline_lock_is_named_to_whoever_waits(project, capsys):
    """The pipeline lock says who holds it: a retrain flow's hours of stage 2 are not an unexplained wait."""
    from stsreg.infra.locking import data_write_lock, pipeline_lock

    def hold(ready: threading.Event):
        with pipeline_lock(project):
            ready.set()
            time.sleep(1.5)

    ready = threading.Event()
    threading.Thread(target=hold, args=(ready,), daemon=True).start()
    ready.wait(10)
    held = r"pipeline lock .* held by PID \d+, `.*`, since \d\d:\d\d:\d\d \(--no-wait\)"
    with pytest.raises(TimeoutError, match=held):
        with data_write_lock(project, timeout_s=0):
            pass
    with data_write_lock(project, timeout_s=30):  # ... and it goes on once the holder lets go
        assert "for: the project's pipeline lock" in capsys.readouterr().err

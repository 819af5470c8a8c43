"""A refused `prepare` under `dvc repro` replaces nothing: DVC deletes a stage's outputs before it runs it unless they
persist, so prepare's outputs are declared `persist: true` (prepare itself swaps them in whole only when it succeeds).
Checked on the declaration and, on a pipeline of the same form, on what DVC does with a stage that fails."""

import subprocess
import sys

import yaml

from tests.conftest import REPO


def test_every_output_of_prepare_persists():
    stage = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]["prepare"]
    outs = [o for kind in ("outs", "metrics") for o in stage[kind]]
    assert all(isinstance(o, dict) and next(iter(o.values())).get("persist") for o in outs), outs


STAGE = """stages:
  prepare:
    cmd: python -c "import sys; sys.exit(2 if open('table.csv').read().count('n/a') else 0)"
    deps:
      - table.csv
    outs:
      - prepared:
          persist: true
    metrics:
      - data.json:
          cache: false
          persist: true
"""


def test_a_failing_stage_leaves_persisted_outputs_as_they_were(tmp_path):
    def run(*cmd):
        return subprocess.run(list(cmd), cwd=tmp_path, capture_output=True, text=True)

    run("git", "init", "-q")
    run(sys.executable, "-m", "dvc", "init", "-q")
    (tmp_path / "dvc.yaml").write_text(STAGE)
    (tmp_path / "table.csv").write_text("a,b,1\n")
    (tmp_path / "prepared").mkdir()
    (tmp_path / "prepared/sts.parquet").write_bytes(b"the last prepared table")
    (tmp_path / "data.json").write_text('{"rows": 1}')
    assert run(sys.executable, "-m", "dvc", "commit", "-f", "-q", "prepare").returncode == 0
    (tmp_path / "table.csv").write_text("a,b,1\nc,d,n/a\n")  # a table the stage refuses
    assert run(sys.executable, "-m", "dvc", "repro", "prepare").returncode != 0
    assert (tmp_path / "prepared/sts.parquet").read_bytes() == b"the last prepared table"
    assert (tmp_path / "data.json").read_text() == '{"rows": 1}'

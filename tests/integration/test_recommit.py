"""``make recommit`` records only what golden proves. In a clone of the project with a small pipeline of its own (one
stage that depends on a param, a data file and two real modules of the training code), each change a user can make
is tried: a param, a data file, code that no golden case of the stage runs and code whose change golden sees are
refused (exit 1, ``dvc.lock`` untouched, the command to run named); a change of code the stage's golden case runs,
that keeps every digest, is recorded (``dvc.lock`` rewritten, ``dvc status`` clean)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO

STAGE = """stages:
  stage2:
    cmd: python -c "open('trained.txt', 'w').write('x')"
    deps:
      - data/extra.csv
      - src/stsreg/product/losses.py
      - src/stsreg/product/objective.py
    params:
      - stage2.lr
    outs:
      - trained.txt
"""


def _run(cwd: Path, *cmd: str, check: bool = True) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "PREFECT_", "STSREG_"))}
    env["PYTHONPATH"] = f"{cwd / 'src'}{os.pathsep}{cwd}"  # the clone's code, not the checkout's
    run = subprocess.run(list(cmd), cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert not check or run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return run


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory) -> Path:
    """A clone of the checkout's HEAD and working tree, its pipeline replaced by :data:`STAGE`, run and committed."""
    clone = tmp_path_factory.mktemp("recommit") / "project"
    subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(REPO), str(clone)], check=True)
    for rel in ("tests", "src"):  # the working tree's versions (the change under test)
        subprocess.run(["cp", "-r", str(REPO / rel) + "/.", str(clone / rel)], check=True)
    (clone / "dvc.yaml").write_text(STAGE)
    (clone / "dvc.lock").unlink()
    (clone / "data").mkdir(exist_ok=True)
    (clone / "data/extra.csv").write_text("sentence1,sentence2,score\na,b,1\n")
    _run(clone, sys.executable, "-m", "dvc", "repro", "stage2")
    _run(clone, "git", "add", "-A", "-f", "dvc.yaml", "dvc.lock", "data/extra.csv", "tests/golden", "src")
    _run(clone, "git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "pipeline")
    return clone


@pytest.fixture
def project(pipeline) -> Path:
    """The pipeline as committed: every test's edits undone."""
    _run(pipeline, "git", "checkout", "-q", "--", ".")
    return pipeline


def _recommit(project: Path) -> subprocess.CompletedProcess:
    lock = (project / "dvc.lock").read_bytes()
    run = _run(project, sys.executable, "-m", "tests.golden.recommit", check=False)
    if run.returncode != 0:
        assert (project / "dvc.lock").read_bytes() == lock, "a refusal wrote dvc.lock"
    return run


def _refused(project: Path) -> str:
    """``make recommit``'s output, which must be a refusal (exit 1, ``dvc.lock`` as it was)."""
    run = _recommit(project)
    assert run.returncode == 1, run.stdout + run.stderr
    return run.stdout


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


def test_recommit_refuses_a_params_change(project):
    _edit(project / "params.yaml", "\n  lr: 2.0e-5 ", "\n  lr: 3.0e-5 ")
    out = _refused(project)
    assert "param stage2.lr modified" in out and "dvc repro stage2" in out


def test_recommit_refuses_a_data_change(project):
    with open(project / "data/extra.csv", "a") as f:
        f.write("c,d,2\n")
    out = _refused(project)
    assert "data data/extra.csv modified" in out and "dvc repro stage2" in out


def test_recommit_refuses_code_no_golden_case_of_the_stage_runs(project):
    # SBERT's softmax objective trains only NLI-table rows: stage 2's golden cases hold, and prove nothing about it
    _edit(project / "src/stsreg/product/losses.py", "return F.cross_entropy(self.classifier(features), labels.long())",
          "return 2 * F.cross_entropy(self.classifier(features), labels.long())")
    out = _refused(project)
    assert "golden moved" not in out
    assert "code src/stsreg/product/losses.py: SoftmaxCE.forward runs in no golden case of the stage" in out


def test_recommit_refuses_a_change_golden_sees(project):
    # L1 trains in the losses case of stage 2: doubling it moves that case's outputs, a behaviour change
    _edit(project / "src/stsreg/product/losses.py", "return F.l1_loss(pred, labels.to(pred.dtype))",
          "return F.l1_loss(pred, labels.to(pred.dtype)) * 2")
    out = _refused(project)
    assert "golden moved losses: l1/" in out and "dvc repro stage2" in out


def test_recommit_records_a_behaviour_neutral_change_of_code_golden_runs(project):
    # a renamed local in the loss stage 2 trains with: a new syntax tree, the same numbers
    _edit(project / "src/stsreg/product/losses.py", "return (self.k * (x - self.x0).pow(2) * active).mean()",
          "outside = (x - self.x0).pow(2) * active\n        return (self.k * outside).mean()")
    run = _recommit(project)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "golden proves stage2" in run.stdout
    status = _run(project, sys.executable, "-m", "dvc", "status", "stage2")
    assert "up to date" in status.stdout or not status.stdout.strip(), status.stdout


def test_recommit_on_a_checkout_without_the_outputs_records_the_code_and_keeps_their_hashes(project):
    # a clone with no DVC cache: the output is absent, and only the proven code's hash may move in dvc.lock
    out, cache = project / "trained.txt", project / ".dvc/cache"
    saved, lock = out.read_bytes(), yaml.safe_load((project / "dvc.lock").read_text())
    subprocess.run(["mv", str(cache), str(project / "cache.kept")], check=True)
    out.unlink()
    try:
        _edit(project / "src/stsreg/product/losses.py", "return (self.k * (x - self.x0).pow(2) * active).mean()",
              "outside = (x - self.x0).pow(2) * active\n        return (self.k * outside).mean()")
        run = _recommit(project)
        assert run.returncode == 0, run.stdout + run.stderr
        after = yaml.safe_load((project / "dvc.lock").read_text())["stages"]["stage2"]
        before = lock["stages"]["stage2"]
        assert after["outs"] == before["outs"] and not out.exists()
        moved = [d["path"] for d, e in zip(after["deps"], before["deps"]) if d != e]
        assert moved == ["src/stsreg/product/losses.py"]
        status = _run(project, sys.executable, "-m", "dvc", "status", "stage2").stdout
        assert "changed deps" not in status and "modified" not in status, status
    finally:
        subprocess.run(["rm", "-rf", str(cache)], check=True)
        subprocess.run(["mv", str(project / "cache.kept"), str(cache)], check=True)
        out.write_bytes(saved)
        _run(project, "git", "checkout", "-q", "--", "dvc.lock")


def test_recommit_finds_the_recorded_code_in_its_history_when_the_lock_was_committed_since(project):
    # another stage re-recorded by a real dvc repro commits dvc.lock beside today's code: the stage the lock kept from
    # before still names its code's older MD5, which stands further back in the file's history
    _edit(project / "src/stsreg/product/losses.py", "return (self.k * (x - self.x0).pow(2) * active).mean()",
          "outside = (x - self.x0).pow(2) * active\n        return (self.k * outside).mean()")
    with open(project / "dvc.lock", "a") as lock:
        lock.write("\n")
    _run(project, "git", "add", "src/stsreg/product/losses.py", "dvc.lock")
    _run(project, "git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "another stage re-recorded")
    try:
        run = _recommit(project)
        assert run.returncode == 0, run.stdout + run.stderr
        assert "golden proves stage2" in run.stdout
    finally:
        _run(project, "git", "reset", "-q", "--hard", "HEAD~1")

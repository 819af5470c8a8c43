"""Atomic outputs and the pipeline lock: a failed write leaves the old output, a concurrent stage waits."""

import os
import subprocess
import sys
import time

import pytest

from stsreg.infra import atomic
from stsreg.infra.locking import HELD_ENV, lock_path, pipeline_lock
from tests.conftest import FIXTURE_RAW, fixture_registry


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "metrics.json"
    atomic.write_text(target, "old")
    with pytest.raises(RuntimeError):
        with atomic.replace_file(target) as tmp:
            tmp.write_text("half of the new")
            raise RuntimeError("killed mid-write")
    assert target.read_text() == "old" and os.listdir(tmp_path) == ["metrics.json"]


def test_a_failed_folder_build_leaves_the_old_folder(tmp_path):
    target = tmp_path / "model"
    with atomic.staged_dir(target) as tmp:
        (tmp / "weights").write_text("v1")
    with pytest.raises(RuntimeError):
        with atomic.staged_dir(target) as tmp:
            (tmp / "weights").write_text("v2, half")
            raise RuntimeError("killed mid-save")
    assert (target / "weights").read_text() == "v1" and os.listdir(tmp_path) == ["model"]
    with atomic.staged_dir(target) as tmp:
        (tmp / "weights").write_text("v2")
    assert (target / "weights").read_text() == "v2" and os.listdir(tmp_path) == ["model"]


def _prepare(project, out, env=None):
    cmd = [os.path.join(os.path.dirname(sys.executable), "stsreg"), "prepare", "--params", str(project / "params.yaml"),
           "--raw", str(FIXTURE_RAW), "--registry", str(fixture_registry(project / "sources.json")), "--prepared",
           str(out / "prepared"),
           "--rejected", str(out / "rejected"), "--metrics", str(out / "data.json")]
    return subprocess.Popen(cmd, cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_a_second_stage_waits_for_the_pipeline_lock(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (project / "params.yaml").write_text("prepare:\n  max_rejected_fraction: 1.0\n")
    with pipeline_lock(project):
        waiting = _prepare(project, tmp_path / "a")
        # a stage started by the lock's holder (the retrain flow's dvc repro) does not wait for its parent
        child = _prepare(project, tmp_path / "b", env={**os.environ, HELD_ENV: str(lock_path(project).resolve())})
        assert child.wait(timeout=120) == 0, child.stderr.read()
        deadline = time.time() + 60
        while waiting.poll() is None and time.time() < deadline and not (tmp_path / "a").exists():
            time.sleep(0.5)
            if time.time() > deadline - 55:  # the waiting one has had 5 s: it must still be waiting, untouched
                break
        assert waiting.poll() is None and not (tmp_path / "a").exists()
    assert waiting.wait(timeout=120) == 0
    assert "waiting for" in waiting.stderr.read() and (tmp_path / "a/data.json").exists()

"""The DVC remote a remote stage 2 exchanges data through: read whole, however long its URL."""

import os
import subprocess
import sys

from pipelines.product.gpu_stage2 import dvc_remote_url


def test_the_default_remote_url_is_read_whole_and_empty_without_one(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", f"{os.path.dirname(sys.executable)}{os.pathsep}{os.environ['PATH']}")
    subprocess.run(["dvc", "init", "--no-scm", "-q"], cwd=tmp_path, check=True)
    assert dvc_remote_url(tmp_path) == ""
    # longer than a terminal line: `dvc remote list` wraps it in its table (a pytest folder numbered >= 100 did)
    url = str(tmp_path / ("a-rather-long-folder-name-" * 4) / "dvc-remote")
    subprocess.run(["dvc", "remote", "add", "-d", "shared", url], cwd=tmp_path, check=True, capture_output=True)
    assert len(url) > 80 and dvc_remote_url(tmp_path) == url

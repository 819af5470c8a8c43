"""Stage 2 on a GPU pool: every edge a user can get wrong is refused before anything is pushed or started, in one
line (an InputError: exit 2 from the CLI, a failed flow run with that message from a deployment)."""

import os
import subprocess
import sys

import pytest

from pipelines.product.gpu_stage2 import preflight
from stsreg.infra.errors import InputError
from tests.helpers.project import tiny_project


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", f"{os.path.dirname(sys.executable)}{os.pathsep}{os.environ['PATH']}")
    for name in [k for k in os.environ if k.startswith("MLFLOW_")]:
        monkeypatch.delenv(name)
    return tiny_project(tmp_path, "backbone", git=True)


def _refused(project, match, repo="file:///origin.git", pool="stsreg-gpu"):
    with pytest.raises(InputError, match=match) as err:
        preflight(project, pool, repo)
    assert len(str(err.value).strip().splitlines()) == 1 or "commit" in match


def test_no_repository_url_is_refused(project):
    _refused(project, "set schedule.repo_url", repo="")


def test_uncommitted_code_is_refused(project):
    (project / "src/stsreg/new_module.py").write_text("x = 1\n")
    _refused(project, "commit .*the changes to src/")


def test_no_dvc_remote_is_refused(project):
    _refused(project, "none is set: `dvc remote add -d shared <url>`")


def test_a_local_mlflow_store_or_an_unreachable_server_is_refused(project, monkeypatch, tmp_path):
    subprocess.run(["dvc", "remote", "add", "-d", "shared", str(tmp_path / "remote")], cwd=project, check=True)
    _refused(project, "logs to a shared MLflow server, but the store is sqlite")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:9")
    _refused(project, "http://127.0.0.1:9 does not answer")


def test_no_deployment_or_a_wrong_pool_is_refused(harness):
    from pipelines.product.gpu_stage2 import _prefect_checks

    with pytest.raises(InputError, match="no deployment stsreg-stage2-remote/gpu at .*: run `stsreg deploy`"):
        _prefect_checks("stsreg-gpu")
    from pipelines.product.deploy import deploy_gpu_stage2

    deploy_gpu_stage2("stsreg-gpu-test")
    with pytest.raises(InputError, match="runs on pool 'stsreg-gpu-test', params.yaml says schedule.gpu_pool: 'gpu2'"):
        _prefect_checks("gpu2")
    with pytest.raises(InputError, match="no worker is online in pool 'stsreg-gpu-test'"):
        _prefect_checks("stsreg-gpu-test")

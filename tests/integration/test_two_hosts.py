"""Two machines on loopback: a "CPU host" clone runs the pipeline and a "GPU host" worker trains stage 2.

A Prefect server, an MLflow server (artifacts proxied) and a CPU-pool worker come from `stsreg servers start` in the
CPU host's clone; a second process worker serves the GPU pool from another folder; the DVC remote is a local folder;
the code travels by git (a bare origin both sides clone). The scheduled retrain is triggered through the Prefect API
and ends with a registered, promoted champion; the Prefect API shows that the stage-2 flow run ran on the GPU pool,
in the GPU host's own clone, and its weights equal a single-host stage 2 on the same inputs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request

import pytest
import yaml

from tests.conftest import free_port
from tests.helpers.project import GIT_IDENTITY, tiny_project
from tests.helpers.services import stop_group
from tests.helpers.weights import weights

GPU_POOL = "stsreg-gpu"


def _git(cwd, *args):
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, env={**os.environ, **GIT_IDENTITY})


@pytest.fixture
def hosts(tiny_backbone, tmp_path, monkeypatch):
    """(origin URL, CPU host clone, GPU host folder, DVC remote) with the GPU pool and repo URL in params.yaml."""
    for name in [k for k in os.environ if k.startswith(("MLFLOW_", "PREFECT_API", "STSREG_"))]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("PATH", f"{os.path.dirname(sys.executable)}{os.pathsep}{os.environ['PATH']}")  # dvc, prefect
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # the same float sums on both hosts and in the single-host check
    monkeypatch.setenv("PREFECT_WORKER_QUERY_SECONDS", "2")
    seed = tiny_project(tmp_path / "seed", tiny_backbone, git=True)
    origin = tmp_path / "origin.git"
    _git(tmp_path, "clone", "-q", "--bare", str(seed), str(origin))
    cpu = tmp_path / "cpu-host"
    _git(tmp_path, "clone", "-q", str(origin), str(cpu))
    params = yaml.safe_load((cpu / "params.yaml").read_text())
    params["schedule"].update(gpu_pool=GPU_POOL, repo_url=str(origin))
    (cpu / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    remote = tmp_path / "dvc-remote"
    subprocess.run(["dvc", "remote", "add", "-d", "shared", str(remote)], cwd=cpu, check=True)
    gpu = tmp_path / "gpu-host"
    gpu.mkdir()
    return origin, cpu, gpu, remote


def test_stage2_runs_on_the_gpu_pool_in_a_second_clone_and_the_champion_is_promoted(hosts):
    from mlflow.tracking import MlflowClient
    from prefect import get_client
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterName
    from prefect.deployments import run_deployment
    from prefect.settings import PREFECT_API_URL, temporary_settings
    from prefect.utilities.asyncutils import run_coro_as_sync

    from pipelines.product.deploy import deploy
    from stsreg.infra import local_servers
    from stsreg.infra.config import load_params

    origin, cpu, gpu, remote = hosts
    urls = local_servers.start(cpu, free_port(), free_port(), timeout=240, prefect_toml=False)
    # the UI on a port other than 4200 calls its own API (it used to call :4200's)
    with urllib.request.urlopen(urls["prefect"] + "/ui-settings", timeout=10) as r:
        assert json.loads(r.read())["api_url"] == urls["prefect_api"]
    gpu_worker = subprocess.Popen(["prefect", "worker", "start", "--pool", GPU_POOL, "--type", "process"], cwd=gpu,
                                  env={**os.environ, "PREFECT_API_URL": urls["prefect_api"],
                                       "STSREG_WORKDIR": str(gpu)},
                                  stdout=open(gpu / "worker.log", "w"), stderr=subprocess.STDOUT,
                                  start_new_session=True)
    try:
        with temporary_settings(updates={PREFECT_API_URL: urls["prefect_api"]}):
            names = deploy(cpu, load_params(cpu / "params.yaml").schedule)
            assert "stsreg-stage2-remote/gpu" in names
            _wait_for_worker(GPU_POOL, gpu_worker, gpu / "worker.log")
            run = run_deployment("stsreg-retrain/weekly", timeout=900)
            assert run.state.is_completed(), (run.state, (gpu / "worker.log").read_text()[-3000:])

            async def stage2_runs():
                async with get_client() as client:
                    return await client.read_flow_runs(deployment_filter=DeploymentFilter(
                        name=DeploymentFilterName(any_=["gpu"])))

            (remote_run,) = run_coro_as_sync(stage2_runs())
        report = json.loads((cpu / "reports/retrain/last_run.json").read_text())
        # the stage-2 flow run: on the GPU pool, picked up by its worker, trained in the GPU host's own clone
        assert remote_run.state.is_completed() and remote_run.work_pool_name == GPU_POOL
        assert report["stage2_remote"]["flow_run_id"] == str(remote_run.id)
        clone = report["stage2_remote"]["clone"]
        assert clone.startswith(str(gpu)) and (cpu / "models/stage2").is_dir() and not clone.startswith(str(cpu))
        assert report["ran"][:3] == ["fetch", "prepare", "stage1"] and "stage2" in report["ran"]
        assert {"evaluate", "register", "promote"} <= set(report["ran"]) and report["pushed"]
        # ... with the parent's commit, and its outputs pushed to the shared DVC remote
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=clone, capture_output=True, text=True).stdout.strip()
        assert commit == report["stage2_remote"]["commit"]
        # the champion: registered and promoted, the stage-2 run logged by the GPU host to the shared MLflow
        mlflow = MlflowClient(tracking_uri=urls["mlflow"])
        assert mlflow.get_model_version_by_alias("sts-regression", "champion").version == "1"
        stage2_runs = mlflow.search_runs([mlflow.get_experiment_by_name("stsreg").experiment_id],
                                         "attributes.run_name = 'stage2'")
        assert len(stage2_runs) == 1 and stage2_runs[0].data.metrics["steps"] > 0
        assert subprocess.run(["dvc", "status", "promote", "--quiet"], cwd=cpu).returncode == 0
    finally:
        stop_group(gpu_worker)
        local_servers.stop(cpu)
    # the same stage 2 on one host, from the same inputs: the same weights
    local = subprocess.run(["stsreg", "train", "--stage", "2", "--stage2-dir", "single-host/stage2", "--checkpoints",
                            "single-host/ckpt", "--metrics", "", "--curves", ""], cwd=cpu, capture_output=True,
                           text=True, env={**os.environ, "STSREG_USE_SERVERS": "0",
                                           # its own store: the project's holds the server's proxied-artifact
                                           # experiments
                                           "MLFLOW_TRACKING_URI": f"sqlite:///{cpu / 'single-host/mlflow.db'}"})
    assert local.returncode == 0, local.stderr[-3000:]
    a, b = weights(cpu / "models/stage2"), weights(cpu / "single-host/stage2")
    assert a.keys() == b.keys() and all(a[k].equal(b[k]) for k in a)


def _wait_for_worker(pool: str, proc, log, timeout: float = 120) -> None:
    from prefect import get_client
    from prefect.client.schemas.objects import WorkerStatus
    from prefect.utilities.asyncutils import run_coro_as_sync

    async def online():
        async with get_client() as client:
            return any(w.status == WorkerStatus.ONLINE for w in await client.read_workers_for_work_pool(pool))

    deadline = time.time() + timeout
    while not run_coro_as_sync(online()):
        assert proc.poll() is None and time.time() < deadline, log.read_text()[-3000:]
        time.sleep(1)

"""torchrun is the same DVC stage: with `launch.stage2_nproc: 2` the stage command `stsreg train --stage 2` relaunches
itself as 2 gloo processes, and rank 0 leaves what one process leaves (model folder, metrics/stage2.json, curves, the
MLflow run with its per-step metrics); `dvc status` is clean after it. On a tiny copy of the project."""

import json
import os
import subprocess
import sys

import yaml

from tests.helpers.project import tiny_project


def test_dvc_stage2_under_torchrun_leaves_the_single_process_outputs(tiny_backbone, tmp_path, monkeypatch):
    from mlflow.tracking import MlflowClient

    monkeypatch.delenv("STSREG_DATA_MIRROR", raising=False)
    monkeypatch.setenv("PATH", f"{os.path.dirname(sys.executable)}{os.pathsep}{os.environ['PATH']}")  # dvc, stsreg
    project = tiny_project(tmp_path, tiny_backbone)
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["launch"] = {"stage2_nproc": 2}
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "PREFECT_API"))},
           "OMP_NUM_THREADS": "1",
           "STSREG_USE_SERVERS": "0"}
    run = subprocess.run(["dvc", "repro", "stage2"], cwd=project, env=env, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, (run.stdout + run.stderr)[-4000:]
    assert "stage 2 on 2 processes" in run.stdout
    assert (project / "models/stage2/head.safetensors").is_file()
    headline = json.loads((project / "metrics/stage2.json").read_text())
    assert headline["steps"] > 0 and "best_dev_spearman" in headline
    for curve in ("dev_curve.csv", "loss_curve.csv"):
        assert len((project / "reports/stage2" / curve).read_text().splitlines()) > 1
    summary = json.loads((project / "models/stage2/training_summary.json").read_text())
    assert summary["world_size"] == 2
    mlflow = MlflowClient(f"sqlite:///{project}/mlflow/mlflow.db")
    (stage2,) = mlflow.search_runs([mlflow.get_experiment_by_name("stsreg").experiment_id], "attributes.run_name = "
                                                                                            "'stage2'")
    assert stage2.info.status == "FINISHED" and stage2.data.metrics["steps"] == headline["steps"]
    assert len(mlflow.get_metric_history(stage2.info.run_id, "train_loss")) == headline["steps"]  # per step, once
    assert {f.path for f in mlflow.list_artifacts(stage2.info.run_id)} >= {"model"}
    status = subprocess.run(["dvc", "status", "stage2", "--quiet"], cwd=project, env=env)
    assert status.returncode == 0

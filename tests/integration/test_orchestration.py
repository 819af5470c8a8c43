"""Production orchestration for real (slow): `stsreg servers` starts Prefect + MLflow servers and a process worker on
free loopback ports for a tiny copy of the project, `deploy` creates the scheduled deployments, the retrain
deployment is triggered through the Prefect API and runs the real DVC pipeline (fetch .. promote) on the fixture
data with a tiny model; then overlapping retrains, and a failing retrain that must leave the champion alone."""

from __future__ import annotations

import json
import subprocess

import pytest
import yaml

from tests.conftest import free_port
from tests.helpers.project import tiny_project

pytestmark = pytest.mark.slow


def test_servers_deploy_trigger_overlap_and_failure(tiny_backbone, tmp_path, monkeypatch):
    from mlflow.tracking import MlflowClient
    from prefect.deployments import run_deployment
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from pipelines.product.deploy import deploy
    from stsreg.infra import local_servers
    from stsreg.infra.config import ScheduleParams

    project = tiny_project(tmp_path, tiny_backbone)
    # the worker inherits this environment: a developer's data mirror would override the fixture's fetch.mirror
    monkeypatch.delenv("STSREG_DATA_MIRROR", raising=False)
    urls = local_servers.start(project, free_port(), free_port(), timeout=240, prefect_toml=False)
    try:
        assert local_servers.status(project)["running"] and local_servers.status(project)["worker"]
        assert (project / ".stsreg/prefect").is_dir() and (project / "mlflow").is_dir()  # state under the project
        mlflow = MlflowClient(tracking_uri=urls["mlflow"])
        with temporary_settings(updates={PREFECT_API_URL: urls["prefect_api"]}):
            names = deploy(project, ScheduleParams(retrain_cron="0 3 * * 1", champion_eval_cron="0 6 * * *"))
            assert names == ["stsreg-retrain/weekly", "stsreg-champion-eval/daily", "stsreg-profile-run/manual",
                             "stsreg-encode-chunks/pool"]
            from prefect import get_client
            from prefect.utilities.asyncutils import run_coro_as_sync

            async def read(name):
                async with get_client() as c:
                    return await c.read_deployment_by_name(name)

            weekly = run_coro_as_sync(read("stsreg-retrain/weekly"))
            assert [s.schedule.cron for s in weekly.schedules] == [
                "0 3 * * 1"
            ] and weekly.global_concurrency_limit.limit == 1
            assert run_coro_as_sync(read("stsreg-profile-run/manual")).schedules == []

            # 1. triggered through the API, picked up by the worker: the whole DVC pipeline, v1 promoted
            run = run_deployment("stsreg-retrain/weekly", timeout=900)
            assert run.state.is_completed(), run.state
            report = json.loads((project / "reports/retrain/last_run.json").read_text())
            assert report["ran"][:2] == ["fetch", "prepare"] and "promote" in report["ran"]
            assert report["new_version"] and report["promoted"] and report["after"]["champion"] == 1
            assert mlflow.get_model_version_by_alias("sts-regression", "champion").version == "1"
            evaluate_runs = mlflow.search_runs([mlflow.get_experiment_by_name("stsreg").experiment_id],
                                               "attributes.run_name = 'evaluate'")
            assert len(evaluate_runs) == 1 and "avg7_spearman" in evaluate_runs[0].data.metrics

            # 2. two overlapping triggers: both finish, one after the other, nothing stale, registry unchanged
            runs = [run_deployment("stsreg-retrain/weekly", timeout=0) for _ in range(2)]
            from prefect.flow_runs import wait_for_flow_run

            states = [run_coro_as_sync(wait_for_flow_run(r.id, timeout=600)).state for r in runs]
            assert all(s.is_completed() for s in states), states
            history = [
                json.loads(line) for line in (project / "reports/retrain/history.jsonl").read_text().splitlines()
            ]
            assert len(history) == 3 and [h["ran"] for h in history[1:]] == [[], []]
            spans = sorted((h["lock_acquired"], h["lock_released"]) for h in history)
            assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))  # lock held by one run at a time
            assert subprocess.run(["dvc", "status", "promote", "--quiet"], cwd=project).returncode == 0

            # 3. a failing retrain (stage 2 rejects its loss) fails the flow run and leaves the registry alone
            params = yaml.safe_load((project / "params.yaml").read_text())
            params["stage2"]["loss"] = "no_such_loss"
            (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
            failed = run_deployment("stsreg-retrain/weekly", timeout=600)
            assert failed.state.is_failed(), failed.state
            assert mlflow.get_model_version_by_alias("sts-regression", "champion").version == "1"
            assert len(mlflow.search_model_versions("name='sts-regression'")) == 1

            # 4. the daily champion check evaluates v1 and tags it
            params["stage2"]["loss"] = "smooth_k2"
            (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
            check = run_deployment("stsreg-champion-eval/daily", timeout=600)
            assert check.state.is_completed(), check.state
            assert "last_eval.avg7_spearman" in mlflow.get_model_version("sts-regression", "1").tags
    finally:
        stopped = local_servers.stop(project)
    assert stopped == ["worker", "prefect", "mlflow"] and not local_servers.status(project)["running"]


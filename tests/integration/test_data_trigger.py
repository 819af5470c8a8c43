"""New labelled data, new champion, no person (slow): on loopback servers, `stsreg data add` appends rows to a declared
table and emits the event; the retrain deployment's trigger starts a retrain at once (no schedule waited for), which
reruns from prepare, registers a new version and gates it; the report names the table that grew."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from tests.conftest import free_port
from tests.helpers.project import declare_reviews, scored_reviews, tiny_project

pytestmark = pytest.mark.slow


def _retrain_runs(client_states) -> list:
    from prefect import get_client
    from prefect.client.schemas.filters import FlowFilter, FlowFilterName
    from prefect.utilities.asyncutils import run_coro_as_sync

    async def read():
        async with get_client() as c:
            return await c.read_flow_runs(flow_filter=FlowFilter(name=FlowFilterName(any_=["stsreg-retrain"])))

    return run_coro_as_sync(read())


@pytest.mark.timeout(1500)
def test_added_rows_trigger_a_retrain_that_registers_and_gates(tiny_backbone, tmp_path, monkeypatch):
    from prefect.deployments import run_deployment
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from pipelines.product.deploy import deploy
    from stsreg.infra import local_servers
    from stsreg.infra.config import ScheduleParams

    project = declare_reviews(tiny_project(tmp_path, tiny_backbone, git=True), gate=["avg7", "reviews"])
    monkeypatch.delenv("STSREG_DATA_MIRROR", raising=False)
    urls = local_servers.start(project, free_port(), free_port(), timeout=240, prefect_toml=False)
    try:
        with temporary_settings(updates={PREFECT_API_URL: urls["prefect_api"]}):
            deploy(project, ScheduleParams(retrain_cron="0 3 * * 1", champion_eval_cron=""))
            first = run_deployment("stsreg-retrain/weekly", timeout=900)  # v1, the first champion
            assert first.state.is_completed(), first.state
            assert json.loads((project / "reports/retrain/last_run.json").read_text())["after"]["champion"] == 1

            scored_reviews(60, 7).to_csv(tmp_path / "new.csv", index=False)
            env = {**os.environ, "PREFECT_API_URL": urls["prefect_api"], "MLFLOW_TRACKING_URI": urls["mlflow"]}
            added = subprocess.run([os.path.join(os.path.dirname(sys.executable), "stsreg"), "data", "add",
                                    str(tmp_path / "new.csv"), "--table", "reviews"], cwd=project, env=env,
                                   capture_output=True, text=True, timeout=120)
            assert added.returncode == 0 and "event stsreg.data.changed sent" in added.stdout, added.stderr
            deadline = time.monotonic() + 900
            while time.monotonic() < deadline:  # the trigger, not a person, starts the second retrain
                runs = _retrain_runs(None)
                done = [r for r in runs if r.id != first.id and r.state and r.state.is_final()]
                if done:
                    break
                time.sleep(3)
            else:
                pytest.fail("no retrain started from the data event")
            assert done[0].state.is_completed(), done[0].state
            report = json.loads((project / "reports/retrain/last_run.json").read_text())
            assert report["tables_changed"] == {"reviews": {"added": 60, "removed": 0}}
            assert "prepare" in report["ran"] and report["new_version"] and report["after"]["latest"] == 2
            assert report["summary"].startswith("tables changed (rows added/removed): reviews +60/-0.")
            decision = json.loads((project / "reports/registry/promotion.json").read_text())
            assert "reviews" in decision["reason"] and "avg7" in decision["reason"]  # judged on both criteria
    finally:
        local_servers.stop(project)

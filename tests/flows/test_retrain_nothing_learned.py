"""A warm retrain that learned nothing ends at stage 2 (slow): the real retrain flow on a tiny copy of the project,
a first champion, rows added by `stsreg data add`, then a warm stage 2 that cannot move the weights. The chain stops
after stage 2 (no evaluation, registration or gate of a copy of the champion), the clock stops there, and the retrain
report and `stsreg report` say "nothing learned from N new rows" with the dev scores."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml

from tests.helpers.project import GIT_IDENTITY, declare_reviews, scored_reviews, tiny_project

pytestmark = pytest.mark.slow

STSREG = os.path.join(os.path.dirname(sys.executable), "stsreg")


@pytest.mark.timeout(1500)
def test_a_warm_retrain_that_learned_nothing_stops_after_stage_2(harness, tiny_backbone, tmp_path, monkeypatch):
    from pipelines.product.ops_flow import retrain_flow

    for name in ("MLFLOW_TRACKING_URI", "STSREG_DATA_MIRROR"):
        monkeypatch.delenv(name, raising=False)
    project = declare_reviews(tiny_project(tmp_path, tiny_backbone, git=True))
    first = retrain_flow(project_dir=str(project))
    assert first["after"]["champion"] == 1, first["summary"]

    params = yaml.safe_load((project / "params.yaml").read_text())
    # an lr far below one ulp of the weights: the warm stage 2 cannot beat its start, the champion
    params["stage2"]["warm_start"] = {"enabled": True, "epochs": 1, "lr": 1e-15, "task_replay": 100.0}
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    subprocess.run(["git", "commit", "-qam", "warm retrains"], cwd=project, check=True, env={**os.environ,
                                                                                            **GIT_IDENTITY})
    scored_reviews(40, 11).to_csv(tmp_path / "new.csv", index=False)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "PREFECT_API"))}
    added = subprocess.run([STSREG, "data", "add", str(tmp_path / "new.csv"), "--table", "reviews"], cwd=project,
                           env=env, capture_output=True, text=True, timeout=300)
    assert added.returncode == 0, added.stdout + added.stderr

    report = retrain_flow(project_dir=str(project))
    found = report["nothing_learned"]
    counted = json.loads((project / "models/stage2/training_summary.json").read_text())["started_from"]["rows"]
    # the new rows stage 2 counted: the added rows its hash split put in train (the others are dev and test pairs)
    assert found and found["version"] == 1 and found["new_rows"] == counted["new"] and 0 < counted["new"] <= 40
    assert report["ran"][-1] == "stage2" and not {"evaluate", "register", "promote"} & set(report["ran"])
    assert [p["phase"] for p in report["clock"]["phases"]][-1] == "stage2"  # the clock stops there
    assert not report["new_version"] and report["after"] == {**first["after"]}
    assert f"nothing learned from {found['new_rows']} new rows: reviews dev {found['start_dev']:.2f} at the start " \
           "(champion v1)" in report["summary"]
    assert json.loads((project / "reports/retrain/last_run.json").read_text())["nothing_learned"] == found

    shown = subprocess.run([STSREG, "report"], cwd=project, env=env, capture_output=True, text=True, timeout=300)
    assert shown.returncode == 0, shown.stderr
    assert (f"No new version: nothing learned from {counted['new']} new rows: reviews dev {found['start_dev']:.2f} at "
            "the start (champion v1)") in shown.stdout and "Registry:" not in shown.stdout

"""The loop's clock, end to end (slow): `make bench-loop`'s run on a tiny project. Round 1 makes a champion, the
servers, the deployment and a following server start, a light load runs, `stsreg data add` starts the retrain
through the trigger; the retrain report's clock has every phase from the added rows to the server answering the new
version, no request fails during the swap, and the written report says so."""

from __future__ import annotations

import json
import os
import subprocess

import pandas as pd
import pytest
import yaml

from tests.conftest import tiny_sts
from tests.helpers.project import GIT_IDENTITY, tiny_project

pytestmark = pytest.mark.slow


def _pairs(n: int, seed: int) -> pd.DataFrame:
    t = tiny_sts(n, seed)
    return pd.DataFrame({"left": t.sentence1, "right": t.sentence2, "stars": t.score / 5 * 4 + 1})  # a 1-5 scale


@pytest.mark.timeout(1800)
def test_the_loop_is_timed_from_the_added_rows_to_the_served_new_version(tiny_backbone, tmp_path, monkeypatch):
    from benchmarks.loop import run
    from benchmarks.loop_report import write
    from pipelines.product.ops_flow import CHAIN

    project = tiny_project(tmp_path, tiny_backbone, git=True)
    _pairs(200, 0).to_csv(project / "data/tables/reviews.csv", index=False)
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["prepare"]["sts_tables"] += [{"name": "reviews", "file": "data/tables/reviews.csv", "scale": [1, 5], "d": 1,
                                        "columns": {"sentence1": "left", "sentence2": "right", "score": "stars"}}]
    params["stage2"].update(train_tables=["stsb", "sickr", "reviews"], dev_table="reviews")
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    subprocess.run(["git", "add", "-A"], cwd=project, check=True)
    subprocess.run(["git", "commit", "-qm", "a declared table"], cwd=project, check=True,
                   env={**os.environ, **GIT_IDENTITY})
    monkeypatch.delenv("STSREG_DATA_MIRROR", raising=False)
    _pairs(60, 7).to_csv(tmp_path / "new.csv", index=False)

    measured = run(project, "reviews", tmp_path / "new.csv", rps=4.0, timeout_s=1200)

    report = measured["report"]
    phases = [p["phase"] for p in report["clock"]["phases"]]
    assert phases[:2] == ["trigger", "lock"] and phases[2:2 + len(CHAIN)] == list(CHAIN), phases
    assert report["trigger"]["rows_added"] == 60 and report["tables_changed"] == {"reviews": {"added": 60,
                                                                                              "removed": 0}}
    ran = {p["phase"]: p["ran"] for p in report["clock"]["phases"] if "ran" in p}
    assert ran["prepare"] and ran["stage2"] and not ran["fetch"]  # the rows rerun from prepare, the raw files stay
    assert report["clock"]["origin"] == pytest.approx(measured["data_added_at"], abs=2)
    if report["promoted"]:  # the gate moved the alias: the flow itself saw the server answer
        assert phases[-1] == "served" and report["served"]["answered"], report["served"]
    else:
        assert measured["swap_by_hand"]["version"] == report["after"]["latest"]
    assert measured["load_new_version_at"] > measured["data_added_at"]
    load = measured["load"]
    assert load["sent"] > 20 and load["failed"] == 0, load["errors"]

    text = write(measured, [], tmp_path / "benchmarks-loop")
    saved = json.loads((tmp_path / "benchmarks-loop.json").read_text())
    assert saved["load"]["failed"] == 0 and saved["total_min"] > 0
    assert "| prepare |" in text and "**0 failed**" in text

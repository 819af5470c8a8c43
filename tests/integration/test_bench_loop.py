"""The loop's clock, end to end (slow): `make bench-loop`'s run on a tiny project. Round 1 makes a champion, the
servers, the deployment and a following server start, a light load runs, `stsreg data add` starts the retrain
through the trigger; the retrain report's clock has every phase from the added rows to the server answering the new
version, no request fails during the swap, and the written report says so."""

from __future__ import annotations

import json

import pytest

from tests.helpers.project import declare_reviews, scored_reviews, tiny_project

pytestmark = pytest.mark.slow


@pytest.fixture(params=["embedded", "postgres"])
def database(request):
    """`make bench-loop`'s stores (None: the embedded SQLite) or `make bench-loop-team`'s PostgreSQL URL."""
    from tests.helpers.services import require, start_postgres

    if request.param == "embedded":
        yield None
        return
    require("postgres")
    server = start_postgres()
    yield server.url
    server.stop()


@pytest.mark.timeout(1800)
def test_the_loop_is_timed_from_the_added_rows_to_the_served_new_version(tiny_backbone, tmp_path, monkeypatch,
                                                                          database):
    from benchmarks.loop import run
    from benchmarks.loop_report import write
    from pipelines.product.ops_flow import CHAIN

    project = declare_reviews(tiny_project(tmp_path, tiny_backbone, git=True))
    monkeypatch.delenv("STSREG_DATA_MIRROR", raising=False)
    scored_reviews(60, 7).to_csv(tmp_path / "new.csv", index=False)
    (project / "reports/registry").mkdir(parents=True, exist_ok=True)  # as a clone of a project that has a champion
    (project / "reports/registry/promotion.json").write_text('{"promoted": true}')

    measured = run(project, "reviews", tmp_path / "new.csv", rps=4.0, timeout_s=1200, database=database)
    assert measured["stack"].startswith("PostgreSQL" if database else "embedded")

    report = measured["report"]
    assert measured["round1_s"] > 0  # the project's own registry had no champion: round 1 made one
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

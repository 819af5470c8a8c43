"""The loop's clock: the retrain's phases are dvc.yaml's chain to `promote`, in order; the clock's table; a running
server found through its announcement and waited for until it answers a new version."""

from __future__ import annotations

import json
import os
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from stsreg.product.loop_clock import Clock, format_clock
from stsreg.product.serving import announce

REPO = Path(__file__).resolve().parents[2]


def _upstream(stages: dict, target: str) -> list[str]:
    """``target`` and every stage it depends on, through outputs feeding dependencies, in an order DVC can run."""
    def feeds(a: str, b: str) -> bool:
        outs = [str(o if isinstance(o, str) else next(iter(o))) for o in stages[a].get("outs", [])]
        deps = stages[b].get("deps", [])
        return any(d == o or d.startswith(o + "/") or o.startswith(d + "/") for d in deps for o in outs)

    order: list[str] = []

    def visit(name: str) -> None:
        for other in stages:
            if other != name and other not in order and feeds(other, name):
                visit(other)
        if name not in order:
            order.append(name)

    visit(target)
    return order


def test_the_retrain_runs_dvc_yamls_chain_to_promote_in_order():
    from pipelines.product.ops_flow import CHAIN

    stages = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]
    assert set(CHAIN) == set(_upstream(stages, "promote"))
    for i, stage in enumerate(CHAIN):  # nothing runs before what feeds it
        assert set(_upstream(stages, stage)) <= set(CHAIN[:i + 1]), stage


def test_the_clock_counts_from_the_added_rows_and_says_each_phase():
    clock = Clock(origin=100.0)
    clock.add("trigger", 100.0, 130.0, note="qa +318")
    clock.add("prepare", 130.0, 190.0, ran=True)
    clock.add("stage1", 190.0, 192.5, ran=False)
    clock.add("served", 192.5, 200.0)
    report = {"clock": clock.as_dict(), "served": {"version": 3, "answered": 200.0}}
    assert report["clock"]["total_s"] == 100.0
    text = format_clock(report)
    assert "| prepare | 1:00.0 | 1:30.0 |" in text and "| stage1 | 0:02.5 | 1:32.5 | up to date |" in text
    assert text.endswith("From when the rows were added to the end: 1:40.0; the server answered with v3.")
    said = format_clock({"clock": Clock().as_dict() | {"phases": clock.phases[1:3], "origin": None},
                         "served": {"why": "no new champion"}})
    assert "From when the retrain started" in said and "no new champion" in said
    assert format_clock({}) == ""


def test_a_failed_phase_is_recorded_and_raised():
    clock = Clock()
    try:
        with clock.phase("stage2"):
            raise RuntimeError("killed")
    except RuntimeError:
        pass
    assert clock.phases[0]["phase"] == "stage2" and clock.phases[0]["failed"] is True


class _Versions(BaseHTTPRequestHandler):
    version = "1"

    def do_GET(self):  # noqa: N802 (the http.server hook's name)
        body = json.dumps({"version": type(self).version}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_the_flow_waits_for_an_announced_follower_to_answer_the_new_version(tmp_path):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Versions)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    try:
        assert announce.wait_for_version(tmp_path, 2, 1.0)["why"].startswith("no server follows @champion")
        with announce.announced(tmp_path, "0.0.0.0", port, "models:/sts-regression@champion", 1.0) as path:
            # a file left by a dead server and one of a server pinned to a version are not followers
            (tmp_path / announce.FOLDER / "9.json").write_text(json.dumps(
                {"url": "http://127.0.0.1:9", "model_uri": "models:/m@champion", "follow_s": 1, "pid": 2 ** 22 + 7}))
            (tmp_path / announce.FOLDER / "8.json").write_text(json.dumps(
                {"url": "http://127.0.0.1:8", "model_uri": "models:/m/1", "follow_s": 1, "pid": os.getpid()}))
            assert [f["url"] for f in announce.followers(tmp_path)] == [f"http://127.0.0.1:{port}"]
            late = announce.wait_for_version(tmp_path, 2, 0.6, poll_s=0.1)
            assert late["why"].startswith("no server answered v2 within 0.6 s") and "'1'" in late["why"]
            threading.Timer(0.3, lambda: setattr(_Versions, "version", "2")).start()
            began = time.time()
            done = announce.wait_for_version(tmp_path, 2, 5.0, poll_s=0.05)
            assert "why" not in done and began + 0.25 < done["servers"][0]["answered"] < began + 2
        assert not path.exists()  # the server's file goes with it
    finally:
        server.shutdown()
        _Versions.version = "1"


def test_stsreg_report_prints_the_last_retrains_clock(tmp_path, monkeypatch, capsys):
    from stsreg.cli import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    (tmp_path / "params.yaml").write_text((REPO / "params.yaml").read_text())
    (tmp_path / "data.json").write_text(json.dumps({"datasets": {}, "leakage": {}, "leakage_match": "normalized",
                                                    "nli_train_rows": 0}))
    clock = Clock(origin=10.0)
    clock.add("trigger", 10.0, 12.0)
    clock.add("stage2", 12.0, 130.0, ran=True)
    (tmp_path / "reports/retrain").mkdir(parents=True)
    (tmp_path / "reports/retrain/last_run.json").write_text(json.dumps({"clock": clock.as_dict(), "served": {}}))
    assert main(["report", "--metrics", "data.json"]) == 0
    out = capsys.readouterr().out
    assert "The last retrain's clock (reports/retrain/last_run.json)" in out and "| stage2 | 1:58.0 | 2:00.0 |" in out


SERVED = """
import sys, uvicorn
from pathlib import Path
from stsreg.product.serving.announce import announced

async def app(scope, receive, send):
    if scope["type"] == "http":
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

with announced(Path(sys.argv[1]), "127.0.0.1", int(sys.argv[2]), "models:/m@champion", 1.0):
    if sys.argv[3] == "serve":  # what `stsreg serve` runs
        from stsreg.product.serving.serve import serve
        serve(app, port=int(sys.argv[2]))
    else:
        uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")
"""


@pytest.mark.parametrize("run, code", [("serve", 0), ("uvicorn", 128 + 15)])
def test_a_server_stopped_with_sigterm_removes_its_announcement(tmp_path, run, code):
    """uvicorn raises SIGTERM again once it has drained; the process must still take its file with it. `stsreg
    serve` (its :func:`serve`) exits 0 after a clean drain (it exited 143); uvicorn run bare still dies of it."""
    import signal
    import socket
    import subprocess
    import sys

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-c", SERVED, str(tmp_path), str(port), run])
    path = tmp_path / announce.FOLDER / f"{port}.json"
    deadline = time.monotonic() + 60
    while announce.served_version(f"http://127.0.0.1:{port}") is None and not path.exists():
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.2)
    while True:  # up and answering
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2).read()
            break
        except OSError:
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.2)
    assert path.exists()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == code
    assert not path.exists()


def test_the_retrain_report_says_where_stage_2_started(tmp_path):
    """A warm retrain's report names the champion stage 2 continued; a warm start that fell back says why; a run
    without stage 2 says nothing of it."""
    from pipelines.product.retrain_report import describe, stage2_origin

    before, after = {"latest": 1, "champion": 1}, {"latest": 2, "champion": 1}
    summary = tmp_path / "models/stage2/training_summary.json"
    summary.parent.mkdir(parents=True)
    summary.write_text(json.dumps({"started_from": {"from": "champion", "version": 1, "run_id": "r"}}))
    origin = stage2_origin(tmp_path, ["prepare", "stage2"])
    assert "stage 2 continued champion v1 (a warm retrain). new version v2" in describe(
        before, after, ["prepare", "stage2"], None, origin)
    assert stage2_origin(tmp_path, ["promote"]) is None
    summary.write_text(json.dumps({"started_from": {"from": "stage1", "why": "no champion yet"}}))
    assert "stage 2 started from stage 1: no champion yet. " in describe(
        before, after, ["stage2"], None, stage2_origin(tmp_path, ["stage2"]))
    summary.write_text("{}")  # a cold retrain of code before the warm start: no mention
    assert "stage 2" not in describe(before, after, ["stage2"], None, stage2_origin(tmp_path, ["stage2"]))
    rows = {"new": 254, "replayed": 500, "old": 2000, "replay": 0.25}
    summary.write_text(json.dumps({"started_from": {"from": "champion", "version": 1, "rows": rows}}))
    assert ("stage 2 continued champion v1 (a warm retrain) on 254 new rows and 500 of 2,000 old ones replayed "
            "(replay 0.25). ") in describe(before, after, ["stage2"], None, stage2_origin(tmp_path, ["stage2"]))
    rows = {"new": 30, "replayed": 67, "old": 161, "task": {"table": "reviews", "replayed": 60, "old": 154,
                                                            "per_new": 2.0},
            "other": {"replayed": 7, "old": 7, "per_new": 4.0}}
    summary.write_text(json.dumps({"started_from": {"from": "champion", "version": 1, "rows": rows}}))
    said = describe(before, after, ["stage2"], None, stage2_origin(tmp_path, ["stage2"]))
    assert ("stage 2 continued champion v1 (a warm retrain) on 30 new rows, 60 of 154 old reviews rows and 7 of 7 "
            "other old rows replayed. ") in said
    summary.write_text(json.dumps({"started_from": {"from": "champion", "version": 1, "replay_why": "no rows kept"}}))
    assert "(a warm retrain) every old row replayed: no rows kept. " in describe(
        before, after, ["stage2"], None, stage2_origin(tmp_path, ["stage2"]))


def test_a_warm_stage2_that_kept_the_champion_is_nothing_learned_and_the_report_says_so():
    """``nothing_learned``: only a warm start (from the champion) that kept step 0 under ``keep: best``; the retrain
    report then ends with the dev scores and names the stages it did not run."""
    from pipelines.product.retrain_report import describe
    from stsreg.product.runners.warm_start import nothing_learned

    rows = {"new": 181, "replayed": 2754, "old": 11017, "replay": 0.25}
    warm = {"started_from": {"from": "champion", "version": 1, "rows": rows}, "kept": "best", "best_step": 0,
            "start_dev_spearman": 82.671, "trained_best_dev_spearman": 82.5, "trained_best_step": 150, "steps": 184}
    found = nothing_learned(warm)
    assert found == {"version": 1, "new_rows": 181, "start_dev": 82.671, "best_trained_dev": 82.5,
                     "best_trained_step": 150, "steps": 184}
    assert nothing_learned({**warm, "best_step": 150}) is None  # it learned: the kept step is a trained one
    assert nothing_learned({**warm, "kept": "trained"}) is None  # the authors' selection never keeps step 0
    assert nothing_learned({**warm, "started_from": {"from": "stage1"}}) is None  # a cold start is not the champion
    assert nothing_learned({}) is None
    text = describe({"latest": 1, "champion": 1}, {"latest": 1, "champion": 1}, ["prepare", "stage2"], None,
                    warm["started_from"], found, "qa")
    assert ("nothing learned from 181 new rows: qa dev 82.67 at the start (champion v1), 82.50 at best after it "
            "(step 150 of 184); no challenger registered; champion stays v1 (evaluate, register and promote not "
            "run") in text

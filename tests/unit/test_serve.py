"""The request guard in front of MLflow's scoring app: nesting depth without recursion, size and type limits."""

import asyncio
import json

from stsreg.product.serving.serve import RequestGuard, json_depth


def test_json_depth_counts_brackets_outside_strings():
    assert json_depth(b"") == 0 and json_depth(b"42") == 0
    assert json_depth(json.dumps({"dataframe_records": [{"sentence1": "a", "sentence2": "b"}]}).encode()) == 3
    assert json_depth(b'{"a": "[[[[{{{{ \\" ]]"}') == 1  # brackets and escaped quotes inside a string
    assert json_depth(b"[" * 100_000) == 100_000  # no recursion, however deep


def _call(guard, body: bytes, headers: list) -> tuple[int, dict]:
    sent = []

    async def receive():
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/invocations", "headers": headers}
    asyncio.run(guard(scope, receive, send))
    return sent[0]["status"], json.loads(sent[1]["body"]) if sent[0]["status"] != 200 else {}


def test_guard_answers_before_the_app_and_replays_good_bodies():
    seen = []

    async def app(scope, receive, send):
        seen.append((await receive())["body"])
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    guard = RequestGuard(app, max_body_bytes=100, max_depth=4)
    js = [(b"content-type", b"application/json")]
    assert _call(guard, b'{"a": [1]}', js)[0] == 200 and seen == [b'{"a": [1]}']
    status, err = _call(guard, b"[" * 5, js)
    assert status == 400 and "nested 5 levels" in err["message"]
    assert _call(guard, b" " * 101, js)[0] == 413
    assert _call(guard, b"{}", js + [(b"content-length", b"5000")])[0] == 413  # declared size, body never read
    assert _call(guard, b"{}", [])[0] == 415
    assert _call(guard, b"[[[[[", [(b"content-type", b"text/csv")])[0] == 200  # depth is a JSON matter only
    assert len(seen) == 2


def _serve(cwd, **env):
    import os
    import subprocess
    import sys

    base = {"PATH": f"{os.path.dirname(sys.executable)}:/usr/bin:/bin", "HOME": os.environ.get("HOME", "/tmp"),
            "STSREG_USE_SERVERS": "0"}
    return subprocess.run([os.path.join(os.path.dirname(sys.executable), "stsreg"), "serve"], cwd=cwd,
                          env={**base, **env}, capture_output=True, text=True, timeout=120)


def test_serve_without_a_champion_or_a_store_or_a_server_is_one_line_and_exit_2(tmp_path):
    from mlflow.tracking import MlflowClient

    run = _serve(tmp_path)  # no mlflow/ folder: not a project that ran `make run`
    assert run.returncode == 2 and "no MLflow store at sqlite:///mlflow/mlflow.db" in run.stderr
    assert not (tmp_path / "mlflow.db").exists() and not (tmp_path / "mlflow").exists()  # nothing created
    (tmp_path / "mlflow").mkdir()
    MlflowClient(f"sqlite:///{tmp_path}/mlflow/mlflow.db").search_experiments()  # an empty registry
    run = _serve(tmp_path)
    assert run.returncode == 2 and run.stderr.strip().splitlines()[-1] == (
        "stsreg serve: no version of sts-regression has the alias champion in sqlite:///mlflow/mlflow.db: run `dvc "
        "repro promote`")
    assert "Traceback" not in run.stderr
    run = _serve(tmp_path, MLFLOW_TRACKING_URI="http://127.0.0.1:9")
    assert run.returncode == 2 and "the MLflow tracking server http://127.0.0.1:9 does not answer" in run.stderr

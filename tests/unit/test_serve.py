"""The request guard in front of MLflow's scoring app: nesting depth without recursion, size and type limits."""

import asyncio
import json

from stsreg.serve import RequestGuard, json_depth


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

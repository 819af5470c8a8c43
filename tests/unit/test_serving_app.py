"""The serving app over real HTTP on loopback (uvicorn), with a toy model in place of a registered version (the real
one is served in tests/flows/test_release_flow.py): the OpenAPI contract holds under schemathesis, a full queue is a
429 with Retry-After, and every refusal, the request guard's included, is counted in /metrics."""

import asyncio
import threading
import time

import pytest
import requests

from tests.conftest import free_port
from tests.helpers.contract import check_contract
from tests.helpers.toy_served import ToyServed, guarded_on_loopback


def _start(drain_s: float = 30.0):
    """(url, the toy model, the uvicorn server, its thread): a guarded app on a free port, with a small queue."""
    from stsreg.product.serving.app import ServingApp
    from stsreg.product.serving.server_config import Admission

    model = ToyServed()
    app = ServingApp(lambda: model, Admission(batch_tokens=8, max_queued_tokens=40)).load_now()
    url, server, thread = guarded_on_loopback(app, drain_s)
    return url, model, server, thread


@pytest.fixture
def live():
    url, model, server, thread = _start()
    yield url, model
    model.gate.set()
    server.should_exit = True
    thread.join(10)


def test_the_openapi_contract_holds_under_schemathesis(live):
    url, _ = live
    assert requests.get(url + "/docs").headers["content-type"].startswith("text/html")
    assert check_contract(url, examples=25) == []
    import re

    metrics = requests.get(url + "/metrics").text  # the cases reached the server, refused and answered alike
    for endpoint in ("/invocations", "/v1/embeddings", "/similarity"):
        sent = sum(float(n) for n in re.findall(rf'stsreg_requests_total{{endpoint="{endpoint}",status="\d+"}} (\S+)',
                                                 metrics))
        assert sent >= 10, (endpoint, metrics)


def test_a_full_queue_is_a_429_with_retry_after_and_every_refusal_is_counted(live):
    url, model = live
    model.gate.clear()  # the encoder holds its first batch: the queue fills

    async def flood():
        import httpx

        async with httpx.AsyncClient(timeout=30) as client:
            async def one(i):
                return await client.post(url + "/v1/embeddings", json={"input": f"w{i} a b c d e f"})

            sent = [asyncio.ensure_future(one(i)) for i in range(20)]  # 7 tokens each, 40 may wait
            await asyncio.sleep(1.0)
            model.gate.set()
            return await asyncio.gather(*sent)

    answers = asyncio.run(flood())
    refused = [r for r in answers if r.status_code == 429]
    assert refused and all(int(r.headers["retry-after"]) >= 1 for r in refused)
    assert refused[0].json()["error_code"] == "TOO_MANY_REQUESTS"
    assert {r.status_code for r in answers} == {200, 429}
    assert requests.post(url + "/similarity", data=b'{"sentence1": "a", "sentence2": "b"}').status_code == 415
    metrics = requests.get(url + "/metrics").text
    assert f'stsreg_refused_total{{reason="queue_full"}} {float(len(refused))}' in metrics
    assert f'stsreg_requests_total{{endpoint="/v1/embeddings",status="429"}} {float(len(refused))}' in metrics
    assert 'stsreg_requests_total{endpoint="/similarity",status="415"} 1.0' in metrics  # the guard's refusal
    for step in ("tokenise", "queue_wait", "encode", "respond"):
        assert f"stsreg_{step}_seconds_count" in metrics


def test_a_half_sent_body_is_answered_408_within_the_timeout(live):
    import socket

    url, _ = live
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(b"POST /similarity HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100"
                  b"\r\n\r\n{\"sentence1\": ")
        started = time.time()
        reply = s.recv(4096)
    assert reply.startswith(b"HTTP/1.1 408") and time.time() - started < 8


@pytest.mark.parametrize("released", [True, False])
def test_a_stopping_server_answers_what_is_in_flight_within_the_drain_bound(released):
    """SIGTERM (uvicorn's should_exit): a request in flight is answered if the encoder frees up in time, and the
    server is gone within drain_s whatever the encoder does."""
    import concurrent.futures

    url, model, server, thread = _start(drain_s=2.0)
    model.gate.clear()
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pending = pool.submit(requests.post, url + "/v1/embeddings", json={"input": "in flight"}, timeout=30)
        time.sleep(0.3)
        stopping = time.time()
        server.should_exit = True
        if released:
            time.sleep(0.5)
            model.gate.set()
        thread.join(15)
        stopped = time.time() - stopping
        if released:
            assert pending.result().status_code == 200
        else:
            with pytest.raises(requests.RequestException):  # cut at the bound, not answered late
                pending.result().raise_for_status()
    model.gate.set()
    assert not thread.is_alive() and stopped < 2.0 + 3.0


def test_the_contract_says_what_the_server_does(live):
    """schemathesis 4 `--checks all` found 15 disagreements between /openapi.json and the server; each one here."""
    import re as regex

    url, _ = live
    for path, allow in (("/health", "GET"), ("/docs", "GET"), ("/invocations", "POST")):
        answer = requests.request("TRACE", url + path, headers={"content-type": "application/json"}, data="{}")
        assert answer.status_code == 405 and answer.headers["allow"] == allow, (path, answer.text)
    pairs = [{"sentence1": "a b", "sentence2": "c d"}]
    extra = requests.post(url + "/invocations", json={"dataframe_records": pairs, "columns": ["x"]})
    assert extra.status_code == 400 and "unknown field(s) ['columns']" in extra.json()["message"]
    for user in (3, {"id": 1}):
        answer = requests.post(url + "/v1/embeddings", json={"input": "a b", "user": user})
        assert answer.status_code == 400 and "user must be a string" in answer.json()["message"]
    assert requests.post(url + "/v1/embeddings", json={"input": "a b", "encoding_format": False}).status_code == 400
    assert requests.post(url + "/v1/embeddings", json={"input": "a b", "user": "me"}).status_code == 200
    one_to_many = requests.post(url + "/similarity", json={"sentence1": "a b", "sentence2": ["a b", "c d", "e"]})
    assert one_to_many.status_code == 200 and len(one_to_many.json()["cosine"]) == 3
    spec = requests.get(url + "/openapi.json").json()
    body = spec["paths"]["/v1/embeddings"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert body["properties"]["dimensions"]["enum"] == [2, None]  # the toy model's dimension, the one it takes
    csv = spec["paths"]["/invocations"]["post"]["requestBody"]["content"]["text/csv"]["schema"]["pattern"]
    assert not regex.search(csv, "") and not regex.search(csv, "sentence1,sentence2\n")  # refused: no rows
    for body_ in ("sentence1,sentence2\na b,c d\n", 'sentence\n"a, ""b"""\n'):
        assert regex.search(csv, body_)
        assert requests.post(url + "/invocations", data=body_, headers={"content-type": "text/csv"}).status_code == 200

"""The flood report (``make bench-flood``, and its section of ``make bench-serve``'s report): one column per server,
the targets judged on ``stsreg serve``'s row, a peer without stsreg's status counts said so."""

import http.client
import os
import socket
import time
from pathlib import Path

from benchmarks import refuse_only
from benchmarks.serve_flood import cpu_seconds, listening, report
from benchmarks.serve_report import _flood
from benchmarks.serve_rows import served


def _row(name: str, served: float, unanswered, p99_429: float, polite_p99: float) -> dict:
    return {"name": name, "seconds": 30, "connections": 200, "texts_per_request": 64, "words_per_text": 400,
            "long_text_rate": 40.0, "wrk": {"200": 10, "429": 5000}, "served_fraction": served,
            "unanswered_admitted": unanswered, "max_latency_s": 3.0,
            "refused_latency": {"n": 100, "p50_ms": 20.0, "p99_ms": p99_429},
            "polite": {"n": 90, "p50_ms": 30.0, "p99_ms": polite_p99, "failed": 0}, "server_statuses": {"200": 12}}


def test_targets_are_judged_on_the_first_row_and_the_peer_stands_beside_it():
    rows = [_row("stsreg serve", 0.75, 0, 40.0, 900.0), _row("Infinity optimum fp32", 0.05, None, 9000.0, 60000.0)]
    text = report(rows, {"cpu": "a CPU", "cores": 2})
    assert "| measure | stsreg serve | Infinity optimum fp32 | target (stsreg serve) |" in text
    assert ">= 0.7: met" in text and "0: met" in text and "p99 <= 50 ms: met" in text and "none failed: met" in text
    assert "| 0 | not counted |" in text  # the peer has no count of admitted requests left unanswered
    worse = report([_row("stsreg serve", 0.42, 3, 170.0, 1600.0)], {"cpu": "a CPU", "cores": 2})
    assert worse.count("NOT met") == 4


def test_the_served_report_shows_the_flood_under_its_own_heading():
    flood = {"machine": {"cpu": "a CPU", "cores": 2}, "rows": [_row("stsreg serve", 0.42, 0, 170.0, 1600.0)]}
    lines = _flood({"flood": flood})
    assert lines[:3] == ["", "## Under a flood", ""] and any(line.startswith("| measure |") for line in lines)
    assert _flood({}) == []


def test_the_floor_column_shows_dashes_where_it_has_no_encoder_and_every_row_its_cpu():
    stsreg = {**_row("stsreg serve", 0.42, 0, 170.0, 1600.0), "cpu_cores": {"server": 1.21, "wrk": 0.36}}
    floor = {**_row("429 only (the floor)", None, None, 20.6, 0.0), "long_text_rate": None,
             "polite": {"n": 0, "failed": 50}, "cpu_cores": {"server": 0.97, "wrk": None}}
    text = report([stsreg, floor], {"cpu": "a CPU", "cores": 2})
    assert "| the encoder's long-text rate, alone (texts/s) | 40.0 | – |  |" in text
    assert "| CPU while the flood ran: the server / wrk (cores of 2) | 1.21 / 0.36 | 0.97 / – |  |" in text
    assert "| 0 | not counted |" in text and "| 0, none, 50 |" in text


def test_the_cpu_a_process_used_and_who_listens_on_a_port_are_read_from_the_system():
    before = cpu_seconds([os.getpid()])
    spin = time.process_time() + 0.3
    while time.process_time() < spin:
        pass
    assert cpu_seconds([os.getpid()]) - before >= 0.2
    assert cpu_seconds([2 ** 22 + 12345]) == 0.0  # a process that is not there used nothing
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        assert os.getpid() in listening(sock.getsockname()[1])


def test_the_floor_refuses_every_request_unread_and_closes_while_its_health_answers(tmp_path):
    root = Path(refuse_only.__file__).resolve().parents[1]
    with served("429 only", refuse_only.COMMAND, "/health", tmp_path / "floor.log", root, timeout_s=60) as url:
        conn = http.client.HTTPConnection(*url.split("//")[1].split(":"), timeout=10)
        conn.request("POST", "/v1/embeddings", b'{"input": ["a"]}', {"Content-Type": "application/json"})
        answer = conn.getresponse()
        assert answer.status == 429 and answer.getheader("connection") == "close"
        assert answer.getheader("retry-after") == "1"
        conn.close()

"""The flood report (``make bench-flood``, and its section of ``make bench-serve``'s report): one column per server,
the targets judged on ``stsreg serve``'s row, a peer without stsreg's status counts said so."""

from benchmarks.serve_flood import report
from benchmarks.serve_report import _flood


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

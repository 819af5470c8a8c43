"""Driving a server with wrk (Debian's C client, one thread: it costs the server little CPU): the request bodies in
turn for a while, at 1, 8 and 32 connections (:data:`CLIENTS`), answered requests per second and latency percentiles.
What ``make bench-serve`` measures every server with (:mod:`benchmarks.serve_load`, :mod:`benchmarks.serve_rows`)."""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
from pathlib import Path

from benchmarks.serve_breakdown import difference, snapshot

#: The connections each cell of the served benchmark runs at.
CLIENTS = (1, 8, 32)


#: wrk's script: the request bodies (one JSON per line of $STSREG_BODIES) in turn, and a JSON summary at the end.
WRK_LUA = """
local bodies = {}
for line in io.lines(os.getenv("STSREG_BODIES")) do bodies[#bodies + 1] = line end
local i = 0
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
request = function()
  i = i % #bodies + 1
  return wrk.format(nil, nil, nil, bodies[i])
end
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('{"requests": %d, "duration_us": %d, "errors": %d, "p50_us": %d, "p95_us": %d, '
    .. '"p99_us": %d}\\n', summary.requests, summary.duration, e.connect + e.read + e.write + e.status + e.timeout,
    latency:percentile(50), latency:percentile(95), latency:percentile(99)))
end
"""


def _load(url: str, bodies: list[dict], clients: int, seconds: float, work: Path) -> dict:
    """``clients`` connections of wrk (Debian's, one thread: a C client that costs the server little CPU) sending
    ``bodies`` in turn for ``seconds``; req/s of answered requests, latency percentiles, errors and the client's own
    CPU (seconds of CPU per second of load: 1.0 = a whole core)."""
    if shutil.which("wrk") is None:
        raise SystemExit("the served benchmark drives the servers with wrk: apt-get install wrk")
    script, lines = work / "load.lua", work / "bodies.jsonl"
    script.write_text(WRK_LUA)
    lines.write_text("".join(json.dumps(b) + "\n" for b in bodies))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(["wrk", "-t1", f"-c{clients}", f"-d{max(1, round(seconds))}s", "--timeout", "60s", "-s",
                           str(script), url], capture_output=True, text=True, env={**os.environ,
                                                                                    "STSREG_BODIES": str(lines)})
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    summary = json.loads([x for x in done.stdout.splitlines() if x.startswith("{")][-1])
    wall, ok = summary["duration_us"] / 1e6, summary["requests"] - summary["errors"]
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"requests": ok, "errors": summary["errors"], "req_s": ok / wall, "client_cpu": cpu / wall,
            **{f"p{q}_ms": summary[f"p{q}_us"] / 1000 for q in (50, 95, 99)}}


def drive(url: str, body, sets: dict, seconds: float, work: Path, metrics: str | None = None) -> dict:
    """Every (set, clients) cell against ``url``; ``body(pair)`` builds a request body. ``metrics``: the server's
    base URL when it answers stsreg's ``/metrics``: each cell then says where its requests' time went
    (:mod:`benchmarks.serve_breakdown`)."""
    out = {}
    for name, pairs in sets.items():
        bodies = [body(p) for p in pairs]
        _load(url, bodies[:50], 4, 1.0, work)  # warm-up
        for clients in CLIENTS:
            before = snapshot(metrics) if metrics else None
            out[f"{name}/{clients}"] = _load(url, bodies, clients, seconds, work)
            if metrics:
                out[f"{name}/{clients}"]["server"] = difference(snapshot(metrics), before)
    return out

"""``make bench-flood``: ``stsreg serve`` under a flood of long texts from one client, beside a polite one.

The flood: ``wrk`` (Debian's, one thread), 200 connections for ``--seconds`` (30), each posting to ``/v1/embeddings``
64 distinct ~400-word texts per request, with no API key (one client: the peer address). Beside it, two clients of
Python's standard library:

- the **polite** client (its own API key) posts one short pair to ``/similarity`` at a time, all along: its statuses
  and latencies (p50 / p99) say whether a flood from one client stops the others;
- the **probe**, one more request of the flood's kind (no key) every 0.2 s: the flood's client as the server sees it,
  timed from the client, so the 429s' latency (p50 / p99) is measured (wrk times every answer together).

Before the flood the encoder's long-text rate is measured alone (one request of 64 long texts, three times, the best
kept): texts per second. The row: wrk's answers by status (200 / 429 / other), the server's own count of requests
that ended 499 (admitted, their client gone first), the 429s' p50 / p99, the polite client's p50 / p99 and failures,
and the texts the flood got answered 200 per second as a fraction of the long-text rate. Targets (issue): >= 0.7 of
the long-text rate, no admitted request unanswered, 429 p99 <= 50 ms, the polite client's p99 <= 1 s.

    python -m benchmarks.serve_flood [--url http://127.0.0.1:5001] [--seconds 30] [--connections 200]
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np

from stsreg.infra import atomic
from stsreg.infra.tracking import cpu_name

REPO = Path(__file__).resolve().parents[1]
WORDS = ("man woman dog cat child car bike street park house river tree guitar piano song book table chair phone "
         "computer plays rides walks reads sings runs sits eats cooks drives a the on in near with under over red "
         "blue green small big old young happy quiet loud fast slow morning evening city village market bridge "
         "garden window door kitchen teacher doctor student friend family water coffee bread music picture").split()
LUA = """
local bodies = {}
for line in io.lines("%(bodies)s") do bodies[#bodies + 1] = line end
local threads = {}
local i = 0
setup = function(thread) table.insert(threads, thread) end
init = function(args) counts = {} end
request = function()
  i = i %% #bodies + 1
  return wrk.format("POST", "/v1/embeddings", {["Content-Type"] = "application/json"}, bodies[i])
end
response = function(status, headers, body)
  counts[status] = (counts[status] or 0) + 1
end
done = function(summary, latency, requests)
  local total = {}
  for _, thread in ipairs(threads) do
    for status, n in pairs(thread:get("counts")) do total[status] = (total[status] or 0) + n end
  end
  local out = io.open("%(counts)s", "w")
  for status, n in pairs(total) do out:write(status .. " " .. n .. "\\n") end
  out:write("max_latency_us " .. latency.max .. "\\n")
  out:close()
end
"""

def long_texts(n: int, words: int, seed: int) -> list[str]:
    """``n`` distinct texts of ``words`` random words each (a counter first, so no two are the same)."""
    rng = random.Random(seed)
    return [f"text {seed}-{k}: " + " ".join(rng.choice(WORDS) for _ in range(words)) for k in range(n)]


def _post(host: str, port: int, path: str, body: bytes, headers: dict | None = None, timeout: float = 60.0):
    """(status, seconds, the response's JSON or None) of one POST on a new connection."""
    started = time.perf_counter()
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request("POST", path, body, {"Content-Type": "application/json", **(headers or {})})
        response = conn.getresponse()
        data = response.read()
        return response.status, time.perf_counter() - started, data
    except OSError:
        return 0, time.perf_counter() - started, b""
    finally:
        conn.close()


def _statuses(url: str) -> dict[str, float]:
    """The server's ``stsreg_requests_total`` by status, all endpoints together."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as r:
        text = r.read().decode()
    out: dict[str, float] = {}
    for status, n in re.findall(r'stsreg_requests_total\{endpoint="[^"]+",status="(\d+)"\} (\S+)', text):
        out[status] = out.get(status, 0.0) + float(n)
    return out


class Client(threading.Thread):
    """One client posting ``body`` to ``path`` until stopped, every ``every_s`` at least: (status, seconds) each."""

    def __init__(self, host: str, port: int, path: str, body: bytes, headers: dict, every_s: float):
        super().__init__(daemon=True)
        self.args, self.every_s = (host, port, path, body, headers), every_s
        self.stop, self.seen = threading.Event(), []

    def run(self) -> None:
        while not self.stop.is_set():
            began = time.perf_counter()
            status, seconds, _ = _post(*self.args, timeout=60.0)
            self.seen.append((status, seconds))
            self.stop.wait(max(0.0, self.every_s - (time.perf_counter() - began)))


def _quantiles(seconds: list[float]) -> dict:
    if not seconds:
        return {"n": 0}
    return {"n": len(seconds), "p50_ms": round(float(np.percentile(seconds, 50)) * 1000, 1),
            "p99_ms": round(float(np.percentile(seconds, 99)) * 1000, 1)}


def flood(url: str, seconds: int, connections: int, texts: int, words: int) -> dict:
    """The flood row (see the module docstring)."""
    host, port = url.split("//")[1].split(":")
    port = int(port)
    one = json.dumps({"input": long_texts(texts, words, 0)}).encode()
    rates = []
    for k in range(3):  # the encoder's long-text rate, alone
        status, took, _ = _post(host, port, "/v1/embeddings", json.dumps({"input": long_texts(texts, words, 100 + k)})
                                .encode())
        if status == 200:
            rates.append(texts / took)
    rate = max(rates) if rates else None
    before = _statuses(url)
    work = Path(tempfile.mkdtemp(prefix="flood-"))
    bodies, counts = work / "bodies.txt", work / "counts.txt"
    bodies.write_text("\n".join(json.dumps({"input": long_texts(texts, words, seed)}) for seed in range(1, 41)) + "\n")
    (work / "flood.lua").write_text(LUA % {"bodies": bodies, "counts": counts})
    polite = Client(host, port, "/similarity", json.dumps({"sentence1": "A man plays a guitar.",
                                                           "sentence2": "Someone plays music."}).encode(),
                    {"Authorization": "Bearer polite"}, 0.25)
    probe = Client(host, port, "/v1/embeddings", one, {}, 0.2)
    began = time.perf_counter()
    wrk = subprocess.Popen([shutil.which("wrk") or "wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--timeout",
                            "60s", "-s", str(work / "flood.lua"), url], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
    time.sleep(1.0)  # the flood is on before the others start
    polite.start()
    probe.start()
    time.sleep(max(0.0, seconds - 2.0))
    during = _statuses(url)  # before wrk's end cuts its requests in flight (those 499s are the run's end, not a wait)
    out = wrk.communicate()[0]
    polite.stop.set()
    probe.stop.set()
    polite.join(70)
    probe.join(70)
    wall = time.perf_counter() - began
    time.sleep(2.0)  # the last answers are counted
    after = _statuses(url)
    by_status = dict(line.split() for line in counts.read_text().splitlines()) if counts.exists() else {}
    max_latency = by_status.pop("max_latency_us", 0)
    answered = int(by_status.get("200", 0))
    server = {s: int(after.get(s, 0) - before.get(s, 0)) for s in sorted(set(after) | set(before))}
    cut_short = int(during.get("499", 0) - before.get("499", 0))
    refused = [s for status, s in probe.seen if status == 429]
    return {"seconds": seconds, "connections": connections, "texts_per_request": texts, "words_per_text": words,
            "long_text_rate": round(rate, 1) if rate else None,
            "wrk": {k: int(v) for k, v in by_status.items()}, "wrk_output": out[-1500:],
            "server_statuses": server, "unanswered_admitted": cut_short,
            "max_latency_s": round(float(max_latency) / 1e6, 1),
            "served_fraction": round(answered * texts / wall / rate, 3) if rate else None,
            "refused_latency": _quantiles(refused),
            "probe": {str(s): sum(1 for status, _ in probe.seen if status == s) for s in {x for x, _ in probe.seen}},
            "polite": {**_quantiles([s for status, s in polite.seen if status == 200]),
                       "failed": sum(1 for status, _ in polite.seen if status != 200)}}


@contextlib.contextmanager
def _champion_served():
    """``stsreg serve`` of the project's ``@champion`` on a free port while the block runs; its URL."""
    from benchmarks.serve_rows import free_port
    from stsreg.infra.local_servers import wait_healthy

    port = free_port()
    log = REPO / "reports/tmp/serve-flood.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    server = subprocess.Popen([str(Path(sys.executable).with_name("stsreg")), "serve", "--model-uri",
                               "models:/sts-regression@champion", "--port", str(port)], cwd=REPO,
                              stdout=open(log, "w"), stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(f"{url}/ready", lambda: server.poll() is None, "stsreg serve", log, 600)
        yield url
    finally:
        server.terminate()
        server.wait(30)


def report(row: dict, machine: dict) -> str:
    targets = {"served": row["served_fraction"] is not None and row["served_fraction"] >= 0.7,
               "unanswered": row["unanswered_admitted"] == 0,
               "refusal": row["refused_latency"].get("p99_ms", 1e9) <= 50,
               "polite": row["polite"].get("p99_ms", 1e9) <= 1000 and row["polite"]["failed"] == 0}
    ok = {k: "met" if v else "NOT met" for k, v in targets.items()}
    wrk = row["wrk"]
    return "\n".join([
        "# `stsreg serve` under a flood of long texts from one client\n",
        f"Machine: {machine['cpu']}; the server and the clients share it. The flood: wrk, {row['connections']} "
        f"connections for {row['seconds']} s, each request {row['texts_per_request']} distinct texts of "
        f"{row['words_per_text']} words to `/v1/embeddings`, no API key (one client); beside it a polite client "
        "(its own key) posting one short pair to `/similarity` at a time, and a probe of the flood's kind every "
        "0.2 s (the flood's client, timed: the 429s' latency). `python -m benchmarks.serve_flood`.\n",
        "| measure | value | target |", "|---|---:|---|",
        f"| the encoder's long-text rate, alone (texts/s) | {row['long_text_rate']} | |",
        f"| wrk's answers: 200 / 429 / other | {wrk.get('200', 0)} / {wrk.get('429', 0)} / "
        f"{sum(v for k, v in wrk.items() if k not in ('200', '429', 'requests'))} | |",
        f"| the flood answered 200, as a fraction of the long-text rate | {row['served_fraction']} | >= 0.7: "
        f"{ok['served']} |",
        f"| admitted requests whose client left first (the server's 499s before wrk's end) | "
        f"{row['unanswered_admitted']} | 0: {ok['unanswered']} |",
        f"| the longest answer wrk waited for (s; its clients wait 60 s) | {row['max_latency_s']} | |",
        f"| 429s' latency p50 / p99 (the probe, {row['refused_latency'].get('n', 0)} refused) | "
        f"{row['refused_latency'].get('p50_ms')} / {row['refused_latency'].get('p99_ms')} ms | p99 <= 50 ms: "
        f"{ok['refusal']} |",
        f"| the polite client: answered, p50 / p99, failed | {row['polite'].get('n', 0)}, "
        f"{row['polite'].get('p50_ms')} / {row['polite'].get('p99_ms')} ms, {row['polite']['failed']} | p99 <= 1 s, "
        f"none failed: {ok['polite']} |",
        "", f"The server's own count of answers during the run, by status: {row['server_statuses']}."]) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", help="a running stsreg serve, e.g. http://127.0.0.1:5001 (default: `stsreg serve` of "
                                  "the project's @champion on a free port, for the run)")
    ap.add_argument("--seconds", type=int, default=30)
    ap.add_argument("--connections", type=int, default=200)
    ap.add_argument("--texts", type=int, default=64, help="texts per flood request")
    ap.add_argument("--words", type=int, default=400, help="words per flood text")
    ap.add_argument("--out", default=str(REPO / "reports/benchmarks-serve-flood"), help="report path, no extension")
    a = ap.parse_args(argv)
    if not shutil.which("wrk"):
        raise SystemExit("wrk is not installed: apt-get install wrk (Debian)")
    if a.url:
        row = flood(a.url.rstrip("/"), a.seconds, a.connections, a.texts, a.words)
    else:
        with _champion_served() as url:
            row = flood(url, a.seconds, a.connections, a.texts, a.words)
    machine = {"cpu": cpu_name(), "cores": os.cpu_count()}
    text = report(row, machine)
    atomic.write_text(Path(a.out).with_suffix(".md"), text)
    atomic.write_json(Path(a.out).with_suffix(".json"), {"machine": machine, **row})
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

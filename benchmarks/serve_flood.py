"""``make bench-flood`` (and the flood rows of ``make bench-serve``): ``stsreg serve`` under a flood of long texts from
one client, beside a polite one; and the best peer computing the model (Infinity's optimum engine on the champion's
fp32 export, its own queue limit: ``INFINITY_QUEUE_SIZE``, 32,000 texts) under the same flood, for comparison; and the
floor, a server that only refuses (:mod:`benchmarks.refuse_only`): what the flood costs these cores before any encoder
runs.

The flood: ``wrk`` (Debian's, one thread), 200 connections for ``--seconds`` (30), each posting to ``/v1/embeddings``
64 distinct ~400-word texts per request, with no API key (one client: the peer address). Beside it, two clients of
Python's standard library:

- the **polite** client (its own API key) posts one short pair at a time, all along (``stsreg serve``: to
  ``/similarity``; a peer without it: as two texts to ``/v1/embeddings``): its statuses and latencies (p50 / p99) say
  whether a flood from one client stops the others;
- the **probe**, one more request of the flood's kind (no key) every 0.2 s: the flood's client as the server sees it,
  timed from the client, so the 429s' latency (p50 / p99) is measured (wrk times every answer together).

Before the flood the encoder's long-text rate is measured alone (one request of 64 long texts, three times, the best
kept): texts per second. The row: wrk's answers by status (200 / 429 / other), the server's own count of requests
that ended 499 (admitted, their client gone first; ``stsreg serve``'s ``/metrics``, none for a peer), the 429s' p50 /
p99, the polite client's p50 / p99 and failures,
the texts the flood got answered 200 per second as a fraction of the long-text rate, and the CPU the server's processes
and wrk used while the flood ran (cores; psutil: the server found by the port it listens on). Targets (issue):
>= 0.7 of the long-text rate, no admitted request unanswered, 429 p99 <= 50 ms, the polite client's p99 <= 1 s.

    python -m benchmarks.serve_flood [--url http://127.0.0.1:5001] [--seconds 30] [--connections 200] [--no-peer]
    python -m benchmarks.serve_flood --server-cpus 0,1 --client-cpus 2-5   # a 2-core server, the load beside it
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
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import psutil

from benchmarks import refuse_only
from benchmarks.serve_rows import INFINITY_VENV, MODEL_URI, infinity_command, infinity_folder, served
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
  return wrk.format("POST", "%(path)s", {["Content-Type"] = "application/json"}, bodies[i])
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


@dataclass(frozen=True)
class FloodTarget:
    """A server under the flood: the row's ``name``, its ``url``, the ``model`` id its ``/v1/models`` names (None: no
    such route, no ``model`` sent), the polite client's request (``polite_path``, ``polite_body``) and whether it
    counts its answers by status as ``stsreg serve``'s ``/metrics`` does (``counts``)."""

    name: str
    url: str
    model: str | None
    polite_path: str
    polite_body: dict
    counts: bool


def target(name: str, url: str) -> FloodTarget:
    """``url``'s server as the flood drives it: ``stsreg serve`` (a ``/similarity`` endpoint) or an embedding peer."""
    try:
        with urllib.request.urlopen(f"{url}/v1/models", timeout=10) as r:
            model = json.loads(r.read())["data"][0]["id"]
    except OSError:  # stsreg serve serves one model and lists none
        model = None
    s1, s2 = "A man plays a guitar.", "Someone plays music."
    if name.startswith("stsreg"):
        return FloodTarget(name, url, model, "/similarity", {"sentence1": s1, "sentence2": s2}, True)
    return FloodTarget(name, url, model, "/v1/embeddings", {"model": model, "input": [s1, s2]}, False)


def _texts(model: str | None, texts: list[str]) -> str:
    """An embeddings request body of ``texts`` (naming ``model`` where the server lists one)."""
    return json.dumps({"input": texts} | ({"model": model} if model else {}))


def _statuses(url: str, counts: bool = True) -> dict[str, float]:
    """The server's ``stsreg_requests_total`` by status, all endpoints together ({} for a server without them)."""
    if not counts:
        return {}
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


def listening(port: int) -> list[int]:
    """The processes listening on TCP ``port`` ([] where the system does not tell whose it is)."""
    try:
        sockets = psutil.net_connections(kind="tcp")
    except psutil.Error:
        return []
    return sorted({s.pid for s in sockets if s.pid and s.status == psutil.CONN_LISTEN and s.laddr.port == port})


def cpu_seconds(pids: list[int]) -> float:
    """CPU seconds (user + system, every thread) the processes ``pids`` have used so far; one gone counts 0."""
    total = 0.0
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            used = psutil.Process(pid).cpu_times()
            total += used.user + used.system
    return total


def _quantiles(seconds: list[float]) -> dict:
    if not seconds:
        return {"n": 0}
    return {"n": len(seconds), "p50_ms": round(float(np.percentile(seconds, 50)) * 1000, 1),
            "p99_ms": round(float(np.percentile(seconds, 99)) * 1000, 1)}


def flood(server: FloodTarget, seconds: int, connections: int, texts: int, words: int) -> dict:
    """The flood row of ``server`` (see the module docstring)."""
    url = server.url
    host, port = url.split("//")[1].split(":")
    port = int(port)
    request = lambda seed: _texts(server.model, long_texts(texts, words, seed))  # noqa: E731
    rates = []
    for k in range(3):  # the encoder's long-text rate, alone
        status, took, _ = _post(host, port, "/v1/embeddings", request(100 + k).encode())
        if status == 200:
            rates.append(texts / took)
    rate = max(rates) if rates else None
    before = _statuses(url, server.counts)
    work = Path(tempfile.mkdtemp(prefix="flood-"))
    bodies, counts = work / "bodies.txt", work / "counts.txt"
    bodies.write_text("\n".join(request(seed) for seed in range(1, 41)) + "\n")
    (work / "flood.lua").write_text(LUA % {"bodies": bodies, "counts": counts, "path": "/v1/embeddings"})
    polite = Client(host, port, server.polite_path, json.dumps(server.polite_body).encode(),
                    {"Authorization": "Bearer polite"}, 0.25)
    probe = Client(host, port, "/v1/embeddings", request(0).encode(), {}, 0.2)
    began = time.perf_counter()
    wrk = subprocess.Popen([shutil.which("wrk") or "wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--timeout",
                            "60s", "-s", str(work / "flood.lua"), url], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
    time.sleep(1.0)  # the flood is on before the others start
    polite.start()
    probe.start()
    pids = listening(port)
    cpu_from = (cpu_seconds(pids), cpu_seconds([wrk.pid]), time.perf_counter())
    time.sleep(max(0.0, seconds - 2.0))
    # before wrk's end cuts its requests in flight (those 499s are the run's end, not a wait)
    cpu_to = (cpu_seconds(pids), cpu_seconds([wrk.pid]), time.perf_counter())
    span = cpu_to[2] - cpu_from[2]
    during = _statuses(url, server.counts)
    out = wrk.communicate()[0]
    polite.stop.set()
    probe.stop.set()
    polite.join(70)
    probe.join(70)
    wall = time.perf_counter() - began
    time.sleep(2.0)  # the last answers are counted
    after = _statuses(url, server.counts)
    by_status = dict(line.split() for line in counts.read_text().splitlines()) if counts.exists() else {}
    max_latency = by_status.pop("max_latency_us", 0)
    answered = int(by_status.get("200", 0))
    statuses = {s: int(after.get(s, 0) - before.get(s, 0)) for s in sorted(set(after) | set(before))}
    cut_short = int(during.get("499", 0) - before.get("499", 0)) if server.counts else None
    refused = [s for status, s in probe.seen if status == 429]
    return {"name": server.name, "seconds": seconds, "connections": connections, "texts_per_request": texts,
            "words_per_text": words, "long_text_rate": round(rate, 1) if rate else None,
            "wrk": {k: int(v) for k, v in by_status.items()}, "wrk_output": out[-1500:],
            "server_statuses": statuses, "unanswered_admitted": cut_short,
            "max_latency_s": round(float(max_latency) / 1e6, 1),
            "served_fraction": round(answered * texts / wall / rate, 3) if rate else None,
            "refused_latency": _quantiles(refused),
            "cpu_cores": {"server": round((cpu_to[0] - cpu_from[0]) / span, 2) if pids else None,
                          "wrk": round((cpu_to[1] - cpu_from[1]) / span, 2)},
            "probe": {str(s): sum(1 for status, _ in probe.seen if status == s) for s in {x for x, _ in probe.seen}},
            "polite": {**_quantiles([s for status, s in polite.seen if status == 200]),
                       "failed": sum(1 for status, _ in polite.seen if status != 200)}}


def cpu_list(text: str | None) -> set[int] | None:
    """``0,1`` / ``2-5`` -> the CPU numbers (None: not pinned)."""
    if not text:
        return None
    out: set[int] = set()
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


@contextlib.contextmanager
def _champion_served(cpus: set[int] | None = None):
    """``stsreg serve`` of the project's ``@champion`` on a free port (on ``cpus``, as many threads) while the block
    runs; its URL."""
    threads = ["--threads", str(len(cpus))] if cpus else []
    cmd = [str(Path(sys.executable).with_name("stsreg")), "serve", "--model-uri", MODEL_URI,
           "--port", "{port}", *threads]
    with served("stsreg serve", cmd, "/ready", REPO / "reports/tmp/serve-flood.log", REPO, cpus=cpus,
                timeout_s=600) as url:
        yield url


@contextlib.contextmanager
def _floor_served(cpus: set[int] | None = None):
    """:mod:`benchmarks.refuse_only` on a free port (on ``cpus``) while the block runs; its URL."""
    with served("429 only", refuse_only.COMMAND, "/health", REPO / "reports/tmp/serve-flood-floor.log", REPO,
                cpus=cpus) as url:
        yield url


@contextlib.contextmanager
def _infinity_served(cpus: set[int] | None = None):
    """Infinity's optimum engine on the champion's fp32 export (as ``make bench-serve`` runs it: the best peer
    computing the model) on a free port while the block runs; its URL."""
    from benchmarks.inference import champion_folder

    work = Path(tempfile.mkdtemp(prefix="flood-infinity-"))
    here = infinity_folder(champion_folder(MODEL_URI, work / "dl"), "onnx/model.onnx", "model.onnx", work / "model")
    threads = len(cpus) if cpus else os.cpu_count() or 1
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads),
           "HF_HUB_CACHE": str(work / ".hf"), "INFINITY_ANONYMOUS_USAGE_STATS": "0", "DO_NOT_TRACK": "1"}
    try:
        with served("Infinity", infinity_command() + ["--engine", "optimum", "--model-id", "."], "/health",
                    REPO / "reports/tmp/serve-flood-infinity.log", here, env, cpus, timeout_s=600) as url:
            yield url
    finally:
        shutil.rmtree(work, ignore_errors=True)


def report(rows: list[dict], machine: dict) -> str:
    """One table, a column per server; the targets are judged for ``stsreg serve`` (the first row)."""
    first = rows[0]
    targets = {"served": first["served_fraction"] is not None and first["served_fraction"] >= 0.7,
               "unanswered": first["unanswered_admitted"] == 0,
               "refusal": first["refused_latency"].get("p99_ms", 1e9) <= 50,
               "polite": first["polite"].get("p99_ms", 1e9) <= 1000 and first["polite"]["failed"] == 0}
    ok = {k: "met" if v else "NOT met" for k, v in targets.items()}

    def line(measure: str, cell, target: str = "") -> str:
        return f"| {measure} | " + " | ".join("–" if cell(r) is None else str(cell(r)) for r in rows) + f" | {target} |"

    other = lambda wrk: sum(v for k, v in wrk.items() if k not in ("200", "429", "requests"))  # noqa: E731
    ms = lambda q: f"{q['p50_ms']} / {q['p99_ms']} ms" if q.get("n") else "none"  # noqa: E731
    refused = lambda r: ms(r["refused_latency"])  # noqa: E731
    polite = lambda r: f"{r['polite'].get('n', 0)}, {ms(r['polite'])}, {r['polite']['failed']}"  # noqa: E731
    cpu = lambda r: " / ".join("–" if c is None else f"{c:.2f}" for c in r.get("cpu_cores", {}).values()) or None  # noqa: E731
    unanswered = lambda r: "not counted" if r["unanswered_admitted"] is None else r["unanswered_admitted"]  # noqa: E731
    return "\n".join([
        "# Serving under a flood of long texts from one client\n",
        f"Machine: {machine['cpu']}; {machine.get('placement', 'each server and the clients share its cores')}. "
        f"The flood: wrk, {first['connections']} connections for {first['seconds']} s, each request "
        f"{first['texts_per_request']} "
        f"distinct texts of {first['words_per_text']} words to `/v1/embeddings`, no API key (one client); beside it a "
        "polite client (its own key) posting one short pair at a time (`/similarity`; to a peer without it, "
        "`/v1/embeddings`), and a probe of the flood's kind every 0.2 s (the flood's client, timed: the 429s' "
        "latency). The targets are `stsreg serve`'s; the peer (Infinity's optimum engine on the same fp32 export, "
        "its own queue limit) is beside it for comparison, and a server that only refuses "
        "(`benchmarks/refuse_only.py`: uvicorn answering every request 429 unread), the floor of what the flood costs "
        "these cores. "
        "`python -m benchmarks.serve_flood`.\n",
        "| measure | " + " | ".join(r["name"] for r in rows) + " | target (stsreg serve) |",
        "|---|" + "---:|" * len(rows) + "---|",
        line("the encoder's long-text rate, alone (texts/s)", lambda r: r["long_text_rate"]),
        line("wrk's answers: 200 / 429 / other", lambda r: f"{r['wrk'].get('200', 0)} / {r['wrk'].get('429', 0)} / "
                                                         f"{other(r['wrk'])}"),
        line("the flood answered 200, as a fraction of the long-text rate", lambda r: r["served_fraction"],
             f">= 0.7: {ok['served']}"),
        line("admitted requests whose client left first (the server's 499s before wrk's end)", unanswered,
             f"0: {ok['unanswered']}"),
        line("the longest answer wrk waited for (s; its clients wait 60 s)", lambda r: r["max_latency_s"]),
        line("429s' latency p50 / p99 (the probe)", refused, f"p99 <= 50 ms: {ok['refusal']}"),
        line("the polite client: answered, p50 / p99, failed", polite, f"p99 <= 1 s, none failed: {ok['polite']}"),
        line(f"CPU while the flood ran: the server / wrk (cores of {machine.get('cores', '?')})", cpu),
        "", f"`stsreg serve`'s own count of answers during the run, by status: {first['server_statuses']}."]) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", help="a running stsreg serve, e.g. http://127.0.0.1:5001 (default: `stsreg serve` of "
                                  "the project's @champion on a free port, for the run)")
    ap.add_argument("--seconds", type=int, default=30)
    ap.add_argument("--connections", type=int, default=200)
    ap.add_argument("--texts", type=int, default=64, help="texts per flood request")
    ap.add_argument("--words", type=int, default=400, help="words per flood text")
    ap.add_argument("--no-peer", action="store_true", help="no Infinity row (default: one when make bench-serve "
                                                           f"has installed it in {INFINITY_VENV})")
    ap.add_argument("--server-cpus", help="the CPUs each server runs on, e.g. 0,1 (its threads as many; default: all, "
                                          "shared with the clients)")
    ap.add_argument("--client-cpus", help="the CPUs wrk and the other clients run on, e.g. 2-5 (default: all)")
    ap.add_argument("--out", default=str(REPO / "reports/benchmarks-serve-flood"), help="report path, no extension")
    a = ap.parse_args(argv)
    server_cpus, client_cpus = cpu_list(a.server_cpus), cpu_list(a.client_cpus)
    if client_cpus:
        os.sched_setaffinity(0, client_cpus)  # this process's client threads and wrk, which inherits it
    if not shutil.which("wrk"):
        raise SystemExit("wrk is not installed: apt-get install wrk (Debian)")
    size = (a.seconds, a.connections, a.texts, a.words)
    if a.url:
        rows = [flood(target("stsreg serve", a.url.rstrip("/")), *size)]
    else:
        with _champion_served(server_cpus) as url:
            rows = [flood(target("stsreg serve", url), *size)]
    if not a.no_peer and (INFINITY_VENV / "bin" / "infinity_emb").exists():
        with _infinity_served(server_cpus) as url:
            rows.append(flood(target("Infinity optimum fp32", url), *size))
    with _floor_served(server_cpus) as url:
        rows.append(flood(target("429 only (the floor)", url), *size))
    machine = {"cpu": cpu_name(), "cores": os.cpu_count()}
    if server_cpus or client_cpus:
        machine["placement"] = (f"each server on CPUs {a.server_cpus or 'all'}, the clients on CPUs "
                                f"{a.client_cpus or 'all'}")
    text = report(rows, machine)
    atomic.write_text(Path(a.out).with_suffix(".md"), text)
    atomic.write_json(Path(a.out).with_suffix(".json"), {"machine": machine, "rows": rows})
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Served benchmark (``make bench-serve``): the champion served several ways, under the same load, on the same cores.

One process per configuration, each given the same ``--threads``; the load is wrk (Debian's ``wrk``, a C client on
one thread: a Python client on 2 cores measures itself) at 1, 8 and 32 connections, each sending one pair per request
for ``--seconds``, the client's own CPU recorded per cell:
*short* = STS-B test pairs, *long* = pairs of passages of at least 128 tokens (cut at the model's maximum length).

- **raw encoder** (the limit): the backend in-process, no server: batch-1 latency of one pair (encode both sentences,
  cosine) and pairs/s at 64 pairs per call;
- the servers of :mod:`benchmarks.serve_rows`: **stsreg serve** with each backend the version may serve, and ``auto``,
  and **Infinity** (torch engine; optimum engine on the champion's fp32 and int8 exports), all on OpenAI's
  ``POST /v1/embeddings``; **mlflow models serve** of the same registered version on ``/invocations``;
  **sentence-transformers + FastAPI**, the server a user would write first.

Writes ``reports/benchmarks-serve.{md,json}``: req/s, p50/p95/p99 ms, errors per row, the CPU model, its flags, cores,
threads and what each server computed in, and the targets (:mod:`benchmarks.serve_report`: ``stsreg serve`` with its
default settings >= 1.2x the best Infinity row's req/s at every concurrency, batch-1 p50 <= Infinity's, long texts
>= the best peer at every concurrency, p99 < 10x p50, 0 errors), met or missed by how much.

    python -m benchmarks.serve_load --seconds 8       # or: make bench-serve (after make run)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks.serve_drive import CLIENTS, drive
from benchmarks import serve_quality

def pair_sets(sts_path: Path, tokenizer, max_length: int) -> tuple[dict[str, list[tuple[str, str]]], list[float]]:
    """({short: STS-B test pairs, long: pairs of >= 128-token passages}, the short pairs' gold scores)."""
    from benchmarks.inference import texts

    sets, test = texts(sts_path, tokenizer, max_length)
    long = sets["long"]
    return {"short": list(zip(test.sentence1, test.sentence2)),
            "long": [(long[i], long[i + 1]) for i in range(0, len(long) - 1, 2)]}, test.score.astype(float).tolist()


def raw_row(folder: Path, backend: str, sets: dict, threads: int, n: int = 200) -> dict:
    """The encoder alone on ``backend``: batch-1 pair latency and pairs/s at 64 pairs per call (run in a subprocess)."""
    import torch

    from stsreg.product.serving import export
    from stsreg.product.model import SiameseRegressor
    from stsreg.product.sts_eval import cosine_scores

    torch.set_num_threads(threads)
    model = export.use_backend(SiameseRegressor.load(folder).eval(), backend, folder, threads)
    out = {}
    for name, pairs in sets.items():
        a, b = [p[0] for p in pairs], [p[1] for p in pairs]
        cosine_scores(model, a[:64], b[:64], 64, False)  # warm-up
        ms = []
        for i in range(min(n, len(pairs))):
            start = time.perf_counter()
            cosine_scores(model, [a[i]], [b[i]], 1, False)
            ms.append((time.perf_counter() - start) * 1000)
        start = time.perf_counter()
        done = 0
        for i in range(0, min(len(pairs), 1024), 64):
            cosine_scores(model, a[i:i + 64], b[i:i + 64], 128, False)
            done += len(a[i:i + 64])
        out[name] = {"p50_ms": float(np.percentile(ms, 50)), "p99_ms": float(np.percentile(ms, 99)),
                     "pairs_s": done / (time.perf_counter() - start)}
    return {"name": f"raw encoder {backend}", "backend": backend, "sets": out}


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sts", default="data/prepared/sts.parquet")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--seconds", type=float, default=8.0, help="load per (set, clients) cell")
    ap.add_argument("--out", default="reports/benchmarks-serve")
    ap.add_argument("--quality-pairs", type=int, default=500,
                    help="STS-B test pairs each embedding server is scored on after its load (serve_quality; at "
                         f"least {serve_quality.PAIRS_NEEDED}: its batch check asks for 64 of their sentences)")
    ap.add_argument("--only", nargs="+", metavar="ROW", default=None,
                    help="measure only these rows, by name (e.g. 'raw encoder torch' 'stsreg serve torch')")
    ap.add_argument("--note", default=None, help="a paragraph for the report's head (what was served, and where)")
    ap.add_argument("--flood", default=None, metavar="JSON",
                    help="the flood rows measured on this machine (python -m benchmarks.serve_flood's JSON), shown in "
                         "the report")
    ap.add_argument("--again", action="store_true",
                    help="measure the --only server rows again though measured: another pass, in the order given; "
                         "the report keeps each cell's best pass (a shared machine's noise only slows a server)")
    ap.add_argument("--raw", nargs=2, metavar=("FOLDER", "BACKEND"), help=argparse.SUPPRESS)  # the raw row's process
    args = ap.parse_args(argv)
    if args.quality_pairs < serve_quality.PAIRS_NEEDED:
        ap.error(f"--quality-pairs {args.quality_pairs}: at least {serve_quality.PAIRS_NEEDED}")
    return args


def main(argv: list[str] | None = None) -> int:
    a = _arguments(argv)
    from stsreg.product.serving import export
    from stsreg.product.model import SiameseRegressor

    work = Path("cache/benchmarks-serve")  # the champion's folder, server logs, the rows measured so far
    work.mkdir(parents=True, exist_ok=True)
    folder = work / "champion"
    if not folder.exists():
        from benchmarks.inference import champion_folder

        from benchmarks.serve_rows import MODEL_URI

        champion_folder(MODEL_URI, work / "dl").rename(folder)
    probe = SiameseRegressor.load(folder)
    sets, a.gold = pair_sets(Path(a.sts), probe.tokenizer, probe.config.max_length)
    if a.raw:
        print(json.dumps(raw_row(Path(a.raw[0]), a.raw[1], sets, a.threads)))
        return 0
    done_path = work / "rows.json"  # a rerun keeps the rows already measured (one crash costs one row)
    saved = json.loads(done_path.read_text()) if done_path.exists() else {"raw": [], "servers": []}
    rows, raws = saved["servers"], saved["raw"]

    def keep(row: dict, into: list) -> None:
        into.append(row)
        done_path.write_text(json.dumps({"raw": raws, "servers": rows}, indent=2))

    names = {r["name"] for r in rows + raws}
    wanted = lambda name: a.only is None or name in a.only  # noqa: E731
    for backend in export.servable(folder):
        if f"raw encoder {backend}" in names or not wanted(f"raw encoder {backend}"):
            continue
        done = subprocess.run([sys.executable, "-m", "benchmarks.serve_load", "--raw", str(folder), backend, "--sts",
                               a.sts,
                               "--threads", str(a.threads)], capture_output=True, text=True, check=True)
        keep(json.loads(done.stdout.strip().splitlines()[-1]), raws)
        print(raws[-1]["name"], raws[-1]["sets"]["short"], flush=True)
    from benchmarks.serve_rows import servers

    a.sets = sets
    order = {name: i for i, name in enumerate(a.only or [])}  # --again: the order given (e.g. reversed)
    for name, measure in sorted(servers(a, folder, export.servable(folder), work), key=lambda r: order.get(r[0], 0)):
        if (name not in names or a.again) and wanted(name):
            keep(measure(), rows)
    from benchmarks.bench_report import machine
    from benchmarks.serve_report import format_report

    from stsreg.infra.runtime import resolve_device

    results = {"machine": {**machine(resolve_device().type), "threads": a.threads}, "seconds": a.seconds, "raw": raws,
               "servers": rows, "client": "wrk (one thread, 1/8/32 connections)",
               **({"note": a.note} if a.note else {}),
               **({"flood": json.loads(Path(a.flood).read_text())} if a.flood else {})}
    Path(a.out + ".json").write_text(json.dumps(results, indent=2))
    Path(a.out + ".md").write_text(format_report(results))
    print(Path(a.out + ".md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())

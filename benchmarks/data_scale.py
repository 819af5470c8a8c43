"""Preparing a user table at scale (``make bench-data``, part of ``make bench``): rows/s and peak memory of the one
reading path (:func:`stsreg.product.data.user_tables.read_table`: read, validate, hash splits, scale mapping) on
generated tables of 100k and 1M pairs, each size in a fresh process so its peak resident memory is its own.

Writes ``reports/benchmarks-data.{json,md}`` with the machine (CPU model, cores) beside each row.

    python -m benchmarks.data_scale                # or: make bench-data
    python -m benchmarks.data_scale --sizes 100000 # one size
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SIZES = (100_000, 1_000_000)
WORDS = ("man woman dog cat child car bike street park house river tree guitar piano song book table chair phone "
         "computer plays rides walks reads sings runs sits eats cooks drives a the on in near with under over red "
         "blue green small big old young happy quiet loud fast slow").split()


def generate(n: int, path: Path, seed: int = 0) -> None:
    """``n`` pairs of 6-14 random words with scores on 0-1 (two decimals), as CSV with a user's column names."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(seed)
    vocab = np.array(WORDS)

    def sentences() -> list[str]:
        lengths = rng.integers(6, 15, n)
        words = vocab[rng.integers(0, len(vocab), lengths.sum())]
        cuts = np.cumsum(lengths)[:-1]
        return [" ".join(w) for w in np.split(words, cuts)]

    pd.DataFrame({"query": sentences(), "answer": sentences(), "rating": rng.integers(0, 101, n) / 100}).to_csv(
        path, index=False)


def measure(n: int) -> dict:
    """One size, in this process: generate, then time the reading path; peak RSS of the whole process."""
    from stsreg.infra.config import StsTableColumns, StsTableSource
    from stsreg.product.data.user_tables import read_table

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "data/tables/pairs.csv"
        path.parent.mkdir(parents=True)
        generate(n, path)
        size_mb = path.stat().st_size / 1e6
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        table = StsTableSource(name="pairs", file="data/tables/pairs.csv", scale=(0.0, 1.0), d=0.01,
                               columns=StsTableColumns(sentence1="query", sentence2="answer", score="rating"))
        t0 = time.perf_counter()
        kept, rejects, counts = read_table(table, Path(tmp))
        seconds = time.perf_counter() - t0
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"pairs": n, "file_mb": round(size_mb, 1), "seconds": round(seconds, 2), "rows_per_s": round(n / seconds),
            "peak_rss_mb": round(peak), "rss_before_mb": round(before), "kept": counts["kept"],
            "splits": {s: counts[f"rows_{s}"] for s in ("train", "dev", "test")}}


def report(rows: list[dict], machine: dict) -> str:
    lines = [f"# Preparing a user table at scale\n\nMachine: {machine['cpu']}; one process per size, "
             f"{machine['date']}. Command: `python -m benchmarks.data_scale` (`make bench-data`).\n",
             "| pairs | CSV | read + validate + hash splits | rows/s | peak memory (process) | train / dev / test |",
             "|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        s = r["splits"]
        lines.append(f"| {r['pairs']:,} | {r['file_mb']} MB | {r['seconds']} s | {r['rows_per_s']:,} | "
                     f"{r['peak_rss_mb']:,} MB | {s['train']:,} / {s['dev']:,} / {s['test']:,} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.data_scale", description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="*", default=list(SIZES))
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)  # the child process: measure one size, print JSON
    ap.add_argument("--out", default="reports/benchmarks-data")
    a = ap.parse_args(argv)
    if a.one:
        print(json.dumps(measure(a.one)))
        return 0
    from stsreg.infra.tracking import cpu_name

    rows = []
    for n in a.sizes:
        print(f"bench-data: {n:,} pairs ...", flush=True)
        out = subprocess.run([sys.executable, "-m", "benchmarks.data_scale", "--one", str(n)], capture_output=True,
                             text=True, check=True)
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    machine = {"cpu": cpu_name(), "date": time.strftime("%Y-%m-%d %H:%M")}
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps({"machine": machine, "rows": rows}, indent=2))
    text = report(rows, machine)
    out.with_suffix(".md").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

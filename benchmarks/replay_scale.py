"""``make bench-replay``: what a warm round costs on a large table of the user's own, against the size of what arrived.

A generated table of 100,000 scored pairs (:func:`benchmarks.data_scale.generate`) is read as ``prepare`` reads a
declared table (:func:`stsreg.product.data.user_tables.read_table`: hash splits, the train split kept) beside 10,249
public train rows (the size of STS-B + SICK-R train); a champion is taken to have trained on all of them (its
``train_rows.npy``: :func:`stsreg.product.training.replay.row_hashes`). Then 1k, 2k and 4k new pairs arrive (appended
to the same file, read again) and the warm retrain's rows are drawn by the product's own
:func:`stsreg.product.training.replay.replayed` with params.yaml's ``stage2.warm_start``. Per arrival: the rows and
optimizer steps of the round (``ceil(rows / stage2.batch_size) * warm_start.epochs``, as stage 2 counts them), against
the recipe that replayed every old row of the task's table (and a tenth of the rest) and against a cold retrain
(every row for ``stage2.epochs``). Writes ``reports/benchmarks-replay.{md,json}``.

    python -m benchmarks.replay_scale [--pairs 100000] [--arrivals 1000 2000 4000]
"""

from __future__ import annotations

import argparse
import math
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks.data_scale import generate
from stsreg.infra import atomic
from stsreg.infra.config import StsTableColumns, StsTableSource, load_params
from stsreg.product.data.user_tables import read_table
from stsreg.product.training.replay import replayed, row_hashes

REPO = Path(__file__).resolve().parents[1]
#: The public train rows beside the table (STS-B train 5,749 + SICK-R train 4,500, as prepared: 10,249).
PUBLIC_ROWS = 10_249
TABLE = StsTableSource(name="task", file="data/tables/pairs.csv", scale=(0.0, 1.0), d=0.01,
                       columns=StsTableColumns(sentence1="query", sentence2="answer", score="rating"))


def _train_rows(folder: Path) -> pd.DataFrame:
    kept, _, _ = read_table(TABLE, folder)
    return kept[kept.split == "train"].reset_index(drop=True)


def _public(n: int, folder: Path) -> pd.DataFrame:
    path = folder / "public.csv"
    generate(n, path, seed=7)
    raw = pd.read_csv(path)
    return pd.DataFrame({"dataset": "stsb", "split": "train", "sentence1": raw["query"], "sentence2": raw["answer"],
                         "score": raw.rating * 5})


def measure(pairs: int, arrivals: list[int]) -> list[dict]:
    """One row per arrival size (see the module docstring)."""
    params = load_params(REPO / "params.yaml")
    warm, batch, seed = params.stage2.warm_start, params.stage2.batch_size, params.seed
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        table = folder / TABLE.file
        table.parent.mkdir(parents=True)
        generate(pairs, table)
        public = _public(PUBLIC_ROWS, folder)
        before = pd.concat([_train_rows(folder), public], ignore_index=True)
        seen = row_hashes(before)
        original = table.read_bytes()
        for n in arrivals:
            extra = folder / "arrival.csv"
            generate(n, extra, seed=1000 + n)
            table.write_bytes(original + extra.read_bytes().split(b"\n", 1)[1])  # appended, header once
            today = pd.concat([_train_rows(folder), public], ignore_index=True)
            began = time.perf_counter()
            train, counts = replayed(today, seen, warm, "task", 0, seed)
            took = time.perf_counter() - began
            old_task = counts["task"]["old"]
            every_task = counts["new"] + old_task + round(0.1 * counts["other"]["old"])
            rows.append({"table_pairs": pairs, "arrived_pairs": n, "new_train_rows": counts["new"],
                         "replayed_task": counts["task"]["replayed"], "replayed_other": counts["other"]["replayed"],
                         "old_task_rows": old_task, "rows": len(train),
                         "steps": math.ceil(len(train) / batch) * warm.epochs,
                         "steps_every_task_row": math.ceil(every_task / batch) * warm.epochs,
                         "steps_cold": math.ceil(len(today) / batch) * params.stage2.epochs,
                         "draw_s": round(took, 2)})
    return rows


def report(rows: list[dict], machine: dict, warm: dict) -> str:
    lines = ["# A warm round's cost follows the arrival, not the table\n",
             f"Machine: {machine['cpu']}. A generated table of {rows[0]['table_pairs']:,} "
             f"pairs of the user's own (hash splits; its train split kept) beside {PUBLIC_ROWS:,} public train rows, "
             "all trained on by the champion; then an arrival of new pairs appended to the same file. The warm "
             "retrain's rows are drawn by `stsreg.product.training.replay.replayed` with params.yaml's "
             f"`stage2.warm_start` ({', '.join(f'`{k}: {v}`' for k, v in warm.items())}); steps at `stage2.batch_size` "
             "for the warm epochs, as stage 2 counts them.\n",
             "| arrived pairs | new train rows | task rows replayed (of old) | other rows replayed | round's rows | "
             "steps | steps, every old task row replayed (the old recipe) | steps, cold (every row, stage2.epochs) | "
             "draw (s) |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['arrived_pairs']:,} | {r['new_train_rows']:,} | {r['replayed_task']:,} "
                     f"(of {r['old_task_rows']:,}) | {r['replayed_other']:,} | {r['rows']:,} | {r['steps']:,} | "
                     f"{r['steps_every_task_row']:,} | {r['steps_cold']:,} | {r['draw_s']} |")
    per = [r["steps"] / r["new_train_rows"] for r in rows]
    lines += ["", f"Steps per new train row: {', '.join(f'{p:.3f}' for p in per)}: the round grows with the arrival "
              f"(less per row once a table's old rows are all replayed); the old recipe took "
              f"{rows[0]['steps_every_task_row'] / rows[0]['steps']:.0f}x the steps "
              "for the first arrival. Whether the task forgets is judged where the data is real: the gate's guard and "
              "the dev scores per round in reports/benchmarks-learn-sick.md."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    from stsreg.infra.tracking import cpu_name

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=100_000, help="pairs in the user's table before the arrival")
    ap.add_argument("--arrivals", type=int, nargs="+", default=[1000, 2000, 4000], help="pairs arriving")
    ap.add_argument("--out", default=str(REPO / "reports/benchmarks-replay"), help="report path without extension")
    a = ap.parse_args(argv)
    rows = measure(a.pairs, a.arrivals)
    machine = {"cpu": cpu_name(), "cores": os.cpu_count()}
    warm = {k: v for k, v in vars(load_params(REPO / "params.yaml").stage2.warm_start).items()}
    text = report(rows, machine, warm)
    atomic.write_text(Path(a.out).with_suffix(".md"), text)
    atomic.write_json(Path(a.out).with_suffix(".json"), {"machine": machine, "warm_start": warm, "rows": rows})
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

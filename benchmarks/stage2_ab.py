"""Stage 2 at full size, speed and quality side by side (``make bench-stage2``): precision x batching x seed.

Each run fine-tunes ``models/stage1`` on the whole stage-2 table with params.yaml's ``stage2`` section, changing only
``model.precision`` (fp32 | bf16), ``stage2.group_by_length`` and the seed; it records the wall time of the loop, pairs
per second, the STS-B dev curve (the only number a choice may read) and, for the report only, the 7-task evaluation
(avg7 and its unseen view). Runs are kept in ``reports/stage2_ab/runs.json`` as they finish, so a rerun skips them.

    python -m benchmarks.stage2_ab --runs fp32:random:42 bf16:random:42 bf16:grouped:42 bf16:grouped:43
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

DEFAULT_RUNS = ("fp32:random:42", "bf16:random:42", "bf16:grouped:42", "bf16:random:43", "bf16:grouped:43")


def run_one(params, spec: str, sts: Path, init: Path) -> dict:
    from stsreg.product.model import SiameseRegressor
    from stsreg.product.runners.eval_runner import run_evaluate
    from stsreg.product.runners.stage2_runner import run_stage2
    from stsreg.product.runners.start import Start

    mode, batching, seed = spec.split(":")
    p = dataclasses.replace(params, seed=int(seed),
                            model=dataclasses.replace(params.model, precision=mode),
                            stage2=dataclasses.replace(params.stage2, group_by_length=batching == "grouped"))
    model = SiameseRegressor.load(init)
    model.config = dataclasses.replace(model.config, precision=mode)
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        summary = run_stage2(Start(model, p), sts, Path(d) / "out", Path(d) / "ckpt")
        wall = time.perf_counter() - t0
        metrics = run_evaluate(p, Path(d) / "out", sts, Path(d) / "eval")
    return {"run": spec, "precision": summary["precision"], "group_by_length": batching == "grouped", "seed": int(seed),
            "wall_s": wall, "steps": summary["steps"], "pairs_per_s": summary["steps"] * p.stage2.batch_size / wall,
            "start_dev": summary["start_dev_spearman"], "best_dev": summary["best_dev_spearman"],
            "best_step": summary["best_step"], "dev_curve": summary["dev_curve"],
            "avg7": metrics["avg7_spearman"], "avg7_unseen": metrics["avg7_unseen_spearman"]}


def format_report(runs: list[dict], machine: dict, params) -> str:
    s2 = params.stage2
    lines = ["# Stage 2: precision and batching, speed and quality", "",
             f"`make bench-stage2` on {machine['cpu']} ({machine['cores']} cores; CPU flags: "
             f"{', '.join(machine['cpu_flags']) or 'n/a'}), {machine['date']}. Each run: models/stage1 -> stage 2 "
             f"(`loss={s2.loss}`, {s2.epochs} epoch(s), batch {s2.batch_size}, lr {s2.lr:g}, dev every {s2.eval_every} "
             "steps); the wall time covers the loop and its dev evaluations. Choices read the dev column only; "
             "avg7 / unseen are reported, not selected on.", "",
             "| precision | batches | seed | wall (min) | pairs/s | dev start | dev best (step) | avg7 | avg7 unseen |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in runs:
        lines.append(f"| {r['precision']} | {'grouped' if r['group_by_length'] else 'random'} | {r['seed']} | "
                     f"{r['wall_s'] / 60:.1f} | {r['pairs_per_s']:.1f} | {r['start_dev']:.2f} | "
                     f"{r['best_dev']:.2f} ({r['best_step']}) | {r['avg7']:.2f} | {r['avg7_unseen']:.2f} |")
    groups: dict[tuple, list[dict]] = {}
    for r in runs:
        groups.setdefault((r["precision"], r["group_by_length"]), []).append(r)
    lines += ["", "| precision | batches | runs | mean pairs/s | mean dev best | mean avg7 | mean unseen |",
              "|---|---|---:|---:|---:|---:|---:|"]
    for (prec, grouped), rs in groups.items():
        mean = lambda k: statistics.mean(r[k] for r in rs)  # noqa: E731
        lines.append(f"| {prec} | {'grouped' if grouped else 'random'} | {len(rs)} | {mean('pairs_per_s'):.1f} | "
                     f"{mean('best_dev'):.2f} | {mean('avg7'):.2f} | {mean('avg7_unseen'):.2f} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.stage2_ab", description=__doc__.split("\n\n")[0])
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--sts", default="data/prepared/sts.parquet")
    ap.add_argument("--init", default="models/stage1", help="starting model (stage 1's output)")
    ap.add_argument("--runs", nargs="+", default=list(DEFAULT_RUNS), help="precision:random|grouped:seed")
    ap.add_argument("--out", default="reports/stage2_ab")
    a = ap.parse_args(argv)
    from benchmarks.bench_report import machine
    from stsreg.infra.config import load_params

    params = load_params(a.params)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    store = out / "runs.json"
    done = {r["run"]: r for r in json.loads(store.read_text())} if store.exists() else {}
    for spec in a.runs:
        if spec in done:
            print(f"stage2_ab: {spec} done, skipped", flush=True)
            continue
        print(f"stage2_ab: {spec} ...", flush=True)
        done[spec] = run_one(params, spec, Path(a.sts), Path(a.init))
        print(f"stage2_ab: {spec}: {done[spec]['wall_s'] / 60:.1f} min, dev {done[spec]['best_dev']:.2f}", flush=True)
        store.write_text(json.dumps(list(done.values()), indent=2))
    runs = [done[s] for s in a.runs]
    (out / "results.md").write_text(format_report(runs, machine(), params) + "\n")
    print(format_report(runs, machine(), params))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Test figures of the comparison's starting point: each seed's stage-1 model (SimCSE-trained encoder + head), scored
like every comparison row (reporting only: no choice reads them). Shows what stage 2 adds to, or takes from, its start.

    python -m stsreg.experiments.explore.stage1_start          # -> reports/explore/stage1_start/<seed>/ and results.md
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from stsreg.infra.config import load_params
from stsreg.product.runners.eval_runner import run_evaluate

OUT, RUNS = Path("reports/explore/stage1_start"), Path("reports/compare/runs")
KEYS = ("stsb_dev", "sts12", "sts13", "sts14", "sts15", "sts16", "stsb", "sickr", "avg7", "avg7_unseen")


def main() -> int:
    params = load_params("params.yaml")
    rows = []
    for seed in params.compare.seeds:
        found = [d for d in RUNS.glob(f"_stage1-{seed}-*") if not d.name.endswith("-checkpoints")]
        # one per stage-1 key: more means older settings are still there, and the pick would be a guess
        if len(found) != 1:
            raise SystemExit(f"expected one stage-1 model of seed {seed} in {RUNS}, found "
                             f"{sorted(d.name for d in found)}")
        start = found[0]
        out = OUT / str(seed)
        if not (out / "metrics.json").exists():
            run_evaluate(dataclasses.replace(params, seed=seed), start, Path("data/prepared/sts.parquet"), out)
        m = json.loads((out / "metrics.json").read_text())
        rows.append([m[f"{k}_spearman"] for k in KEYS])
    mean = [sum(c) / len(c) for c in zip(*rows)]
    text = ("The comparison's start (`reports/compare/runs/_stage1-<seed>-*`: stage 1 with its SimCSE encoder step), "
            f"mean of seeds {list(params.compare.seeds)}, Spearman x100 of cosine:\n\n"
            "| " + " | ".join(KEYS) + " |\n" + "|---" * len(KEYS) + "|\n| " + " | ".join(f"{v:.2f}"
                                                                                         for v in mean) + " |\n")
    (OUT / "results.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

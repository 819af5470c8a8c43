"""Where a comparison row wins or loses on the STS12-16 test sets: all pairs vs within each subset (reporting only).

The protocol scores each STS year on all of its pairs pooled ("all" Spearman), so a model gains there both by ordering
pairs inside a subset (MSRpar, MSRvid, ...) and by placing whole subsets against each other. This splits a row's
difference to a reference row into the two: the mean within-subset Spearman, and the rest (all minus within-mean).
It reads the finished rows of ``reports/compare/rows/<method>-<seed>/metrics.json`` (Spearman x100; subset keys are
``<task>_<subset>_spearman``) and writes ``reports/explore/subset_breakdown.md``. Test numbers only describe what was
trained: nothing here feeds a choice.

    python -m stsreg.experiments.explore.subset_breakdown --reference ours_cos
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import pandas as pd

TASKS = ("sts12", "sts13", "sts14", "sts15", "sts16")
SUFFIXES = ("unseen", "prediction")


def row_table(runs: Path) -> pd.DataFrame:
    """One row per (method, seed, task): all-pairs Spearman, mean within-subset Spearman."""
    rows = []
    for path in sorted(runs.glob("*-*/metrics.json")):
        m = re.fullmatch(r"(.+)-(\d+)", path.parent.name)
        if not m or m.group(1).startswith("_"):
            continue
        metrics = {k.removesuffix("_spearman"): v for k, v in json.loads(path.read_text()).items()
                   if k.endswith("_spearman")}
        for task in TASKS:
            subsets = [v for k, v in metrics.items() if k.startswith(f"{task}_") and k.split("_", 1)[1] not in SUFFIXES]
            rows.append({"method": m.group(1), "seed": int(m.group(2)), "task": task, "all": metrics[task],
                         "within": sum(subsets) / len(subsets)})
    return pd.DataFrame(rows)


def breakdown(table: pd.DataFrame, reference: str) -> pd.DataFrame:
    """Mean over shared seeds of (row - reference) per task: all, within, and all - within (between subsets)."""
    ref = table[table.method == reference].set_index(["seed", "task"])
    out = []
    for method, t in table[table.method != reference].groupby("method"):
        d = (t.set_index(["seed", "task"])[["all", "within"]] - ref[["all", "within"]]).dropna()
        seeds = d.index.get_level_values("seed").nunique()  # the seeds both rows have
        for task, r in d.groupby("task").mean().iterrows():
            out.append({"method": method, "task": task, "all": r["all"], "within": r["within"],
                        "between": r["all"] - r["within"], "seeds": seeds})
    return pd.DataFrame(out)


def to_markdown(b: pd.DataFrame, reference: str) -> str:
    lines = [
        f"Difference to `{reference}` per STS year (test sets, Spearman x100, mean over the seeds both rows have): "
        "`all` = the protocol's pooled score, `within` = the mean of the per-subset Spearmans, `between` = all - "
        "within (how whole subsets are placed against each other). Reporting only.",
        "",
        "| method | seeds | " + " | ".join(f"{t} all / within / between" for t in TASKS) + " |",
        "|---|---:|" + "---|" * len(TASKS),
    ]
    for method, t in b.groupby("method"):
        t = t.set_index("task")
        cells = [f"{t.loc[k, 'all']:+.2f} / {t.loc[k, 'within']:+.2f} / {t.loc[k, 'between']:+.2f}" for k in TASKS]
        lines.append(f"| {method} | {int(t.seeds.iloc[0])} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", default="reports/compare/rows")
    ap.add_argument("--reference", default="ours_cos")
    ap.add_argument("--out", default="reports/explore/subset_breakdown.md")
    a = ap.parse_args(argv)
    text = to_markdown(breakdown(row_table(Path(a.runs)), a.reference), a.reference)
    Path(a.out).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

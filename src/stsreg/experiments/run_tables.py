"""Tables over folders of (row, seed) runs, shared by the comparison and the NLI table.

Each finished row ``<rows>/<row>-<seed>/`` (:mod:`stsreg.experiments.row_results`) holds ``metrics.json``
(:func:`stsreg.product.sts_eval.task_metrics` plus intervals), its per-pair scores and, for trained rows,
``training_summary.json``.
Spearman figures are x100.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from stsreg.experiments import row_results
from stsreg.infra import atomic, public_tables
from stsreg.product.data.catalogue import EVAL_TASKS
from stsreg.product.sts_eval import paired_on_predictions

#: The figures of each row: the 7 tasks, their mean and its leakage-free (unseen) view.
COLUMNS = [*EVAL_TASKS, "avg7", "avg7_unseen"]


def collect(rows_dir: Path, methods, seeds) -> pd.DataFrame:
    """One row per (method, seed) with the metrics of ``<rows_dir>/<method>-<seed>/metrics.json``."""
    rows = []
    for method in methods:
        for seed in seeds:
            run = rows_dir / f"{method}-{seed}"
            m = json.loads((run / "metrics.json").read_text())
            trained = {}
            if (run / "training_summary.json").exists():  # the base row trains nothing
                s = json.loads((run / "training_summary.json").read_text())
                trained = {"dev_start": s["start_dev_spearman"], "dev_kept": s["trained_best_dev_spearman"],
                           "kept_step": s["trained_best_step"], "total_steps": s["total_steps"]}
            rows.append({"method": method, "seed": seed, **m, **trained})
    return pd.DataFrame(rows)


def results_table(runs: pd.DataFrame) -> pd.DataFrame:
    """(method) x (task mean, std, CI low/high averaged over seeds): the CSV behind the markdown table."""
    out = []
    for method, g in runs.groupby("method", sort=False):
        row = {"method": method, "seeds": len(g)}
        for col in COLUMNS:
            key = "avg7_unseen_spearman" if col == "avg7_unseen" else f"{col}_spearman"
            row[f"{col}_mean"] = g[key].mean()
            row[f"{col}_std"] = g[key].std(ddof=1) if len(g) > 1 else 0.0
            row[f"{col}_low"] = g[f"{key}_low"].mean()
            row[f"{col}_high"] = g[f"{key}_high"].mean()
        for col in ("dev_start", "dev_kept", "kept_step", "total_steps"):
            row[col] = g[col].mean() if col in g and g[col].notna().any() else np.nan
        out.append(row)
    return pd.DataFrame(out)


def paired_tests(rows_dir: Path, pairs, seeds, n_resamples: int, seed: int = 0) -> pd.DataFrame:
    """Each (a, b) of ``pairs``, per seed, on the same test pairs: a - b in avg7 and avg7-unseen, one-sided p that
    a is better."""
    rows = []
    for reference, other in pairs:
        for s in seeds:
            a = row_results.predictions(rows_dir, f"{reference}-{s}")
            b = row_results.predictions(rows_dir, f"{other}-{s}")
            for view, unseen in (("avg7", False), ("avg7_unseen", True)):
                r = paired_on_predictions(a, b, unseen, n_resamples, seed)
                rows.append({"reference": reference, "other": other, "seed": s, "view": view, **r.as_dict()})
    return pd.DataFrame(rows)


def format_compare(table: pd.DataFrame, tests: pd.DataFrame | None, seeds, settings: str = "") -> str:
    """Markdown: mean ± std (and mean 95% CI) per task and avg7, then the paired tests; ``settings``: a line
    saying what every row trained with (:func:`stsreg.experiments.compare.budget`)."""
    head = [public_tables.display(t) for t in (*public_tables.AVG7, "avg7")] + ["avg7 unseen"]
    lines = [f"Spearman x100 of cosine, mean ± std over {len(seeds)} seed(s) {list(seeds)}; avg7 95% CI = pair "
             f"bootstrap, "
             "bounds averaged over seeds." + (f" {settings}" if settings else ""), "",
             "STS-B dev: the dev Spearman at step 0 -> of the checkpoint the row evaluates (the best after step 0), "
             "and its step.", "",
             "| method | " + " | ".join(head) + " | avg7 95% CI | STS-B dev (start -> kept @ step) |",
             "|---|" + "---:|" * (len(head) + 1) + "---|"]
    for _, r in table.iterrows():
        cells = [f"{r[c + '_mean']:.2f} ± {r[c + '_std']:.2f}" if r["seeds"] > 1 else f"{r[c + '_mean']:.2f}"
                 for c in COLUMNS]
        dev = (f"{r['dev_start']:.2f} -> {r['dev_kept']:.2f} @ {r['kept_step']:.0f}/{r['total_steps']:.0f}"
               if pd.notna(r.get("dev_kept", np.nan)) else "untrained")
        lines.append(f"| {r['method']} | " + " | ".join(cells) + f" | [{r['avg7_low']:.2f}, {r['avg7_high']:.2f}] | "
                                                                 f"{dev} |")
    if tests is not None and not tests.empty:
        ref = tests.reference.iloc[0]
        lines += ["", f"Paired bootstrap on the same test pairs, a minus b (one-sided p that a is better; per seed). "
                      f"a = {ref}, the regression row with the best mean STS-B dev, against every other row; then the "
                      "pairs the paper's claims rest on:", "",
                  *paired_table(tests)]
    return "\n".join(lines)


def paired_table(tests: pd.DataFrame) -> list[str]:
    """Markdown lines of paired tests (columns reference, other, seed, view, diff, low, high, p_value: one row per
    pair, view and seed): one line per (a, b, view) with the mean difference and every seed's CI and p."""
    lines = ["| a | b | view | diff (mean over seeds) | 95% CI (per seed) | p (per seed) |",
             "|---|---|---|---:|---|---|"]
    for (a, other, view), g in tests.groupby(["reference", "other", "view"], sort=False):
        cis = ", ".join(f"[{lo:+.2f}, {hi:+.2f}]" for lo, hi in zip(g.low, g.high))
        lines.append(f"| {a} | {other} | {view} | {g['diff'].mean():+.2f} | {cis} | "
                     f"{', '.join(f'{p:.3f}' for p in g.p_value)} |")
    return lines


def plot_methods(table: pd.DataFrame, path: Path) -> None:
    """Grouped bars: avg7 and avg7-unseen per method with the mean 95% CI as error bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = np.arange(len(table))
    fig, ax = plt.subplots(figsize=(8, 4))
    for i, (col, label) in enumerate((("avg7", "avg7"), ("avg7_unseen", "avg7 unseen"))):
        mean = table[f"{col}_mean"].to_numpy()
        err = np.vstack([mean - table[f"{col}_low"].to_numpy(), table[f"{col}_high"].to_numpy() - mean])
        ax.bar(x + (i - 0.5) * 0.38, mean, 0.38, yerr=err, capsize=3, label=label)
    ax.set_xticks(x, table.method)
    lo = float(np.nanmin(table[["avg7_low", "avg7_unseen_low"]].to_numpy()))
    ax.set_ylim(max(0.0, lo - 3), None)
    ax.set_ylabel("Spearman x100 (cosine)")
    ax.set_title("STS 7-task average by fine-tuning method (95% pair-bootstrap CI)")
    ax.legend()
    fig.tight_layout()
    atomic.savefig(fig, path, dpi=120)
    plt.close(fig)

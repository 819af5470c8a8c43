"""The tables ``stsreg report`` prints (data counts and leakage, the stage-2 dev curve, the evaluation, the registry)
and the method tables and plots of the comparison and the NLI table."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from stsreg import atomic
from stsreg.runtable import COLUMNS


def format_data_report(metrics: dict) -> str:
    """Markdown tables of per-dataset counts and per-task leakage from ``data/prepared/summary.json``."""
    lines = ["| dataset | train | dev | test | other | rejected | duplicate pairs | unscored skipped |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name, d in metrics["datasets"].items():
        other = sum(v for k, v in d.items() if k.startswith("rows_") and k not in ("rows_train", "rows_dev", "rows_test"))
        lines.append(f"| {name} | {d.get('rows_train', 0)} | {d.get('rows_dev', 0)} | {d.get('rows_test', 0)} | {other} | "
                     f"{d['rejected']} | {d['duplicate_pairs']} | {d['unscored_skipped']} |")
    lines += ["", f"NLI training rows: {metrics['nli_train_rows']}", "",
              f"Leakage ({metrics['leakage_match']} match) — evaluation test pairs also in a training table:", "",
              f"| task | test pairs | seen (exact) | seen (normalized) | in STS-B train | in SICK train | in NLI train | unseen ({metrics['leakage_match']}) |",
              "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for task, d in metrics["leakage"].items():
        lines.append(f"| {task} | {d['test_pairs']} | {d['seen_exact']} | {d['seen_normalized']} | {d['seen_in_stsb_train']} | "
                     f"{d['seen_in_sickr_train']} | {d['seen_in_nli_train']} | {d['unseen_' + metrics['leakage_match']]} |")
    if metrics.get("leakage_removed"):
        lines += ["", f"Removed from training for leakage: {metrics['leakage_removed']}"]
    return "\n".join(lines)


def run_report(data_summary: Path, models: Path, eval_metrics: Path, promotion: Path) -> str:
    """Every table of the last pipeline run, from its output files (each skipped when absent)."""
    parts = [format_data_report(json.loads(data_summary.read_text(encoding="utf-8")))]
    summary_path = models / "stage2" / "training_summary.json"
    if summary_path.exists():
        s = json.loads(summary_path.read_text(encoding="utf-8"))
        curve = s["dev_curve"]
        trained = (f"; best after step 0 {s['trained_best_dev_spearman']:.2f} (step {s['trained_best_step']})"
                   if "trained_best_dev_spearman" in s else "")
        parts.append(f"\nStage 2: STS-B dev Spearman (cosine, x100) {curve[0][1]:.2f} before -> {s['best_dev_spearman']:.2f} "
                     f"kept (step {s['best_step']} of {s['total_steps']}; step 0 = nothing beat the start){trained}; curve: "
                     + ", ".join(f"{int(step)}:{v:.2f}" for step, v in curve))
    if eval_metrics.exists():
        from stsreg.evaluate import format_table

        parts.append("\nEvaluation of models/stage2 (SentEval 'all', Spearman x100 of cosine; unseen = test pairs in no "
                     "training table):\n")
        parts.append(format_table(json.loads(eval_metrics.read_text(encoding="utf-8"))))
    if promotion.exists():
        d = json.loads(promotion.read_text(encoding="utf-8"))
        parts.append(f"\nRegistry: sts-regression v{d['challenger']} "
                     f"{'promoted to champion' if d['promoted'] else 'not promoted'}: {d['reason']}")
    return "\n".join(parts)


def format_compare(table: pd.DataFrame, tests: pd.DataFrame | None, seeds, settings: str = "") -> str:
    """Markdown: mean ± std (and mean 95% CI) per task and avg7, then the paired tests; ``settings``: a line
    saying what every row trained with (:func:`stsreg.compare.budget`)."""
    head = ["STS12", "STS13", "STS14", "STS15", "STS16", "STS-B", "SICK-R", "avg7", "avg7 unseen"]
    lines = [f"Spearman x100 of cosine, mean ± std over {len(seeds)} seed(s) {list(seeds)}; avg7 95% CI = pair bootstrap, "
             "bounds averaged over seeds." + (f" {settings}" if settings else ""), "",
             "STS-B dev: the dev Spearman at step 0 -> of the checkpoint the row evaluates (the best after step 0), "
             "and its step.", "",
             "| method | " + " | ".join(head) + " | avg7 95% CI | STS-B dev (start -> kept @ step) |",
             "|---|" + "---:|" * (len(head) + 1) + "---|"]
    for _, r in table.iterrows():
        cells = [f"{r[c + '_mean']:.2f} ± {r[c + '_std']:.2f}" if r["seeds"] > 1 else f"{r[c + '_mean']:.2f}" for c in COLUMNS]
        dev = (f"{r['dev_start']:.2f} -> {r['dev_kept']:.2f} @ {r['kept_step']:.0f}/{r['total_steps']:.0f}"
               if pd.notna(r.get("dev_kept", np.nan)) else "untrained")
        lines.append(f"| {r['method']} | " + " | ".join(cells) + f" | [{r['avg7_low']:.2f}, {r['avg7_high']:.2f}] | {dev} |")
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
    lines = ["| a | b | view | diff (mean over seeds) | 95% CI (per seed) | p (per seed) |", "|---|---|---|---:|---|---|"]
    for (a, other, view), g in tests.groupby(["reference", "other", "view"], sort=False):
        cis = ", ".join(f"[{lo:+.2f}, {hi:+.2f}]" for lo, hi in zip(g.low, g.high))
        lines.append(f"| {a} | {other} | {view} | {g['diff'].mean():+.2f} | {cis} | {', '.join(f'{p:.3f}' for p in g.p_value)} |")
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

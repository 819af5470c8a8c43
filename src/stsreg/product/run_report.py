"""The tables ``stsreg report`` prints: data counts and leakage, the stage-2 dev curve, the evaluation, the registry."""

from __future__ import annotations

import json
from pathlib import Path

from stsreg.infra import public_tables
from stsreg.product.runners.warm_start import nothing_learned, nothing_learned_text



def format_data_report(metrics: dict) -> str:
    """Markdown tables of per-dataset counts and per-task leakage from ``data/prepared/summary.json``."""
    lines = ["| dataset | source | scale (d) | train | dev | test | other | rejected | duplicate pairs | unscored "
             "skipped |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name, d in metrics["datasets"].items():
        other = sum(v for k, v in d.items() if k.startswith("rows_")
                    and k not in ("rows_train", "rows_dev", "rows_test"))
        source = d.get("file") or (f"mirror ({d['reader']})" if "reader" in d else "mirror")  # NLI: the mirror's files
        scale = f"{d['scale'][0]:g}-{d['scale'][1]:g} ({d['d']:g})" if "scale" in d else ""
        lines.append(f"| {name} | {source} | {scale} | {d.get('rows_train', 0)} | {d.get('rows_dev', 0)} | "
                     f"{d.get('rows_test', 0)} | {other} | {d['rejected']} | {d.get('duplicate_pairs', 0)} | "
                     f"{d.get('unscored_skipped', 0)} |")
    # one column per training table (STS-B, SICK-R, any declared table's train split, NLI), as prepare counted them
    first = next(iter(metrics["leakage"].values()), {})
    tables = [k.removeprefix("seen_in_") for k in first if k.startswith("seen_in_")]
    names = {"nli_train": "NLI train", **{f"{t}_train": f"{public_tables.display(t)} train"
                                          for t in public_tables.TRAINED}}
    mode = metrics["leakage_match"]
    lines += ["", f"NLI training rows: {metrics['nli_train_rows']}", "",
              f"Leakage ({mode} match) — evaluation test pairs also in a training table:", "",
              "| task | test pairs | seen (exact) | seen (normalized) | "
              + " | ".join(f"in {names.get(t, t.replace('_train', ' train'))}" for t in tables) + f" | unseen ({mode}) "
                                                                                                  f"|",
              "|---|---:|---:|---:|" + "---:|" * len(tables) + "---:|"]
    for task, d in metrics["leakage"].items():
        lines.append(f"| {task} | {d['test_pairs']} | {d['seen_exact']} | {d['seen_normalized']} | "
                     + " | ".join(str(d.get(f"seen_in_{t}", 0)) for t in tables) + f" | {d['unseen_' + mode]} |")
    if metrics.get("leakage_removed"):
        lines += ["", f"Removed from training for leakage: {metrics['leakage_removed']}"]
    return "\n".join(lines)


def run_report(data_summary: Path, models: Path, eval_metrics: Path, promotion: Path,
               dev_table: str = public_tables.DEV_TABLE) -> str:
    """Every table of the last pipeline run, from its output files (each skipped when absent); ``dev_table``: the
    table whose dev split selected stage 2's checkpoint (``stage2.dev_table``)."""
    parts = [format_data_report(json.loads(data_summary.read_text(encoding="utf-8")))]
    summary_path = models / "stage2" / "training_summary.json"
    if summary_path.exists():
        s = json.loads(summary_path.read_text(encoding="utf-8"))
        curve = s["dev_curve"]
        trained = (f"; best after step 0 {s['trained_best_dev_spearman']:.2f} (step {s['trained_best_step']})"
                   if "trained_best_dev_spearman" in s else "")
        parts.append(f"\nStage 2: {public_tables.display(dev_table)} dev Spearman (cosine, x100) {curve[0][1]:.2f} "
                     f"before -> {s['best_dev_spearman']:.2f} "
                     f"kept (step {s['best_step']} of {s['total_steps']}; step 0 = nothing beat the start){trained}; "
                     f"curve: "
                     + ", ".join(f"{int(step)}:{v:.2f}" for step, v in curve))
        found = nothing_learned(s)
        if found:  # models/stage2 is the champion itself: an evaluation or a gate decision on disk is of another run
            parts.append(f"\nNo new version: {nothing_learned_text(found, public_tables.display(dev_table))}; the "
                         f"champion v{found['version']} stays (the evaluation and the gate of an earlier run are not "
                         "shown)")
            return "\n".join(parts)
    if eval_metrics.exists():
        from stsreg.product.sts_eval import format_table

        parts.append("\nEvaluation of models/stage2 (SentEval 'all', Spearman x100 of cosine; unseen = test pairs in "
                     "no training table):\n")
        parts.append(format_table(json.loads(eval_metrics.read_text(encoding="utf-8"))))
    if promotion.exists():
        d = json.loads(promotion.read_text(encoding="utf-8"))
        if d.get("status") == "failed":
            parts.append(f"\nRegistry: the last gate FAILED, no decision was made: {d['error']}")
            return "\n".join(parts)
        parts.append(f"\nRegistry: sts-regression v{d['challenger']} "
                     f"{'promoted to champion' if d['promoted'] else 'not promoted'}: {d['reason']}")
    return "\n".join(parts)

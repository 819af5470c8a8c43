"""The baselines table (``reports/baselines/results.md``) and its bar plot.

One row per system: what it ran on, STS-B test Pearson / Spearman x100 with 95% pair-bootstrap intervals, the MSE of
its score against label / 5, the study's Spearman (x100) beside it, avg7 and avg7-unseen (the 7-task protocol), the
STS-B dev Spearman at the start and of the kept weights, training minutes and parameter counts. The regression
framework's rows from ``compare`` follow for reference, then the retrieval cost of a cross-encoder.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from stsreg.infra import atomic
from stsreg.experiments.baselines.experiment import SYSTEMS


def _study(s: str) -> str:
    return " / ".join(f"{100 * float(x):.1f}" for x in s.split(" / ")) if s else "-"


def _count(n: float) -> str:
    return "0" if n == 0 else f"{n / 1e6:.2f}M" if n >= 1e5 else f"{n / 1e3:.1f}k"


def rows_table(runs: pd.DataFrame) -> pd.DataFrame:
    """The numbers of each finished system (one seed: the experiment's), as the CSV behind the markdown."""
    cols = ["system", "family", "runs_on", "stsb_pearson", "stsb_pearson_low", "stsb_pearson_high", "stsb_spearman",
            "stsb_spearman_low", "stsb_spearman_high", "stsb_mse01", "study_spearman", "avg7_spearman",
            "avg7_unseen_spearman", "dev_start", "dev_kept", "dev_mse01", "train_seconds", "score_seconds",
            "trainable_parameters", "total_parameters"]
    out = runs.assign(family=runs.system.map(lambda s: SYSTEMS[s].family),
                      study_spearman=runs.system.map(lambda s: SYSTEMS[s].study_spearman))
    return out.reindex(columns=cols)


def format_table(table: pd.DataFrame, unavailable: dict[str, str], compare: pd.DataFrame | None,
                 retrieval: dict | None, backbone: str, seed: int) -> str:
    """Markdown: the systems, the unavailable ones and why, the compare rows for reference, the retrieval cost."""
    lines = [
        f"Trained on STS-B train, selected on STS-B dev (Spearman), scored on STS-B test and the 7 tasks; seed "
        f"{seed}. "
        f"Transformer systems run on {backbone!r} (the study's BERT / ALBERT / RoBERTa / Qwen2.5-0.5B rows need a "
        "model hub: see the README). Pearson / Spearman x100 with 95% pair-bootstrap intervals; MSE of the score "
        "against label / 5 (the study's scale); the study's Spearman x100 beside ours; avg7 = the 7-task protocol "
        "(Spearman x100 of the system's similarity); dev = STS-B dev Spearman at the start -> of the kept weights.",
        "",
        "| system | family | runs on | STS-B Pearson | STS-B Spearman | MSE (0-1) | study Spearman | avg7 | "
        "avg7 unseen | dev (start -> kept) | train min | params trained / total |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---|---:|---:|",
    ]
    for _, r in table.iterrows():
        dev = f"{r.dev_start:.2f} -> {r.dev_kept:.2f}" if pd.notna(r.dev_kept) else "untrained"
        lines.append(
            f"| {r.system} | {r.family} | {r.runs_on} | {r.stsb_pearson:.2f} [{r.stsb_pearson_low:.2f}, "
            f"{r.stsb_pearson_high:.2f}] | {r.stsb_spearman:.2f} [{r.stsb_spearman_low:.2f}, "
            f"{r.stsb_spearman_high:.2f}] | "
            f"{r.stsb_mse01:.4f} | {_study(r.study_spearman)} | {r.avg7_spearman:.2f} | {r.avg7_unseen_spearman:.2f} | "
            f"{dev} | {r.train_seconds / 60:.1f} | {_count(r.trainable_parameters)} / {_count(r.total_parameters)} |")
    for name, why in unavailable.items():
        lines.append(f"| {name} | {SYSTEMS[name].family} | not run: {why} | | | | "
                     f"{_study(SYSTEMS[name].study_spearman)} | | | | | |")
    lines += ["", "What each system trains: " + "; ".join(f"`{n}` {SYSTEMS[n].trained}" for n in
                                                           list(table.system) + list(unavailable)) + ".",
              "The study's rows: " + "; ".join(f"`{n}` = {SYSTEMS[n].study_row}" for n in
                                               list(table.system) + list(unavailable)) + "."]
    if compare is not None and not compare.empty:
        lines += ["", "The regression framework's rows (`make compare`: trained on STS-B train + SICK-R train, "
                      "evaluated at max length 256), for reference:", "",
                  "| compare row | STS-B Spearman | avg7 | avg7 unseen |", "|---|---:|---:|---:|"]
        lines += [f"| {r.method} | {r.stsb_mean:.2f} | {r.avg7_mean:.2f} | {r.avg7_unseen_mean:.2f} |"
                  for r in compare.itertuples()]
    if retrieval:
        r = retrieval
        lines += [
            "",
            f"Retrieval cost (one query against {r['candidates']:,} candidates, {backbone!r}, "
            f"{r['precision']}, {r['threads']} threads): a cross-encoder reads every (query, candidate) pair, "
            f"**{r['cross_pairs_per_s']:,.0f} pairs/s** ({r['cross_seconds']:.1f} s per query); a bi-encoder "
            f"embeds the candidates once ({r['bi_index_seconds']:.1f} s, an index) and then scores "
            f"**{r['bi_pairs_per_s']:,.0f} pairs/s** ({1000 * r['bi_query_seconds']:.1f} ms per query: one "
            f"encoding and a matrix-vector product), {r['speedup_bi_over_cross']:,.0f}x faster per query. "
            f"Even counting the index build, the bi-encoder scores {r['bi_pairs_per_s_with_index']:,.0f} "
            f"pairs/s "
            "for the first query. A cross-encoder yields no sentence embedding, so it cannot index a corpus: "
            "its accuracy is paid for by a full pass per query.",
        ]
    return "\n".join(lines)


def plot(table: pd.DataFrame, path: Path) -> None:
    """Horizontal bars: STS-B test Spearman x100 per system with its 95% interval; the study's figure as a marker."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = table.iloc[::-1]
    y = np.arange(len(t))
    fig, ax = plt.subplots(figsize=(8, 0.42 * len(t) + 1.4))
    err = np.vstack([t.stsb_spearman - t.stsb_spearman_low, t.stsb_spearman_high - t.stsb_spearman])
    colors = {"word vectors": "#8fb3d9", "recurrent": "#f0b27a", "bi-encoder": "#7dcea0", "cross-encoder": "#c39bd3"}
    ax.barh(y, t.stsb_spearman, xerr=err, capsize=3, color=[colors[f] for f in t.family], label="ours")
    study = [max((100 * float(x) for x in s.split(" / ")), default=np.nan) if s else np.nan for s in t.study_spearman]
    ax.scatter(study, y, marker="|", s=200, color="black", zorder=3, label="study (best backbone)")
    ax.set_yticks(y, t.system)
    ax.set_xlabel("STS-B test Spearman x100")
    ax.set_xlim(min(0.0, float(np.nanmin(t.stsb_spearman_low)) - 5), 100)
    ax.set_title("Baselines on STS-B test (95% pair-bootstrap CI)")
    ax.legend(loc="upper right", fontsize=8)  # the top bars (word vectors) are short
    fig.tight_layout()
    atomic.savefig(fig, path, dpi=120)
    plt.close(fig)

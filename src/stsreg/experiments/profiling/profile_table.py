"""The profile's outputs: the results frame, the markdown table and the memory-vs-length plot."""

from __future__ import annotations

import numpy as np

from stsreg.infra import atomic
from stsreg.experiments.profiling.grid import GridSpec, peak_of


def results_frame(rows: list[dict], spec: GridSpec):
    """One row per configuration with ``ratio_to_reference`` (shown peak / contrastive reference peak)."""
    import pandas as pd

    ref, _ = peak_of(rows, "contrastive", *spec.reference)
    df = pd.DataFrame(rows)
    for col in ("peak_mb", "predicted_mb", "step_s", "predicted_step_s"):
        if col not in df:
            df[col] = np.nan
    df["shown_mb"] = df.peak_mb.where(df.status == "measured", df.predicted_mb)
    df["ratio_to_reference"] = df.shown_mb / ref
    return df.sort_values(["method", "batch", "length"]).reset_index(drop=True)


def format_table(df, spec: GridSpec, device: str) -> str:
    """Markdown: measured vs predicted peak MB and step time, ratio to the contrastive reference point."""
    b, l = spec.reference
    lines = [f"Device: {device}. Peak = training memory above the loaded model "
             f"({'CUDA max_memory_allocated' if device != 'cpu' else 'CPU peak RSS'}); "
             f"predicted = cost model c0 + c1·B·L + c2·B·L² fitted on the measured points of the method.", "",
             f"| method | batch | length | status | peak MB | predicted MB | ratio to contrastive b{b}/len{l} | s/step "
             "| predicted s/step |",
             "|---|---:|---:|---|---:|---:|---:|---:|---:|"]

    def f(x, fmt):
        return "–" if x != x else format(x, fmt)

    for r in df.itertuples():
        mark = "**" if (r.batch, r.length) in (spec.headline, spec.reference) and r.method in ("regression_full",
                                                                                               "contrastive") else ""
        lines.append(f"| {mark}{r.method}{mark} | {r.batch} | {r.length} | {r.status} | {f(r.peak_mb, '.0f')} | "
                     f"{f(r.predicted_mb, '.0f')} | {f(r.ratio_to_reference, '.3f')} | {f(r.step_s, '.3f')} | "
                     f"{f(r.predicted_step_s, '.3f')} |")
    return "\n".join(lines)


def plot(df, spec: GridSpec, path) -> None:
    """Memory vs sequence length, one panel per grid batch size, one line per method; hollow markers = predicted.
    The contrastive reference point (the paper's batch 512) is stated in the title."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    batches = sorted(spec.batch_sizes)
    colors = {m: f"C{i}" for i, m in enumerate(spec.methods)}
    fig, axes = plt.subplots(1, len(batches), figsize=(3.8 * len(batches), 3.6), squeeze=False)
    for ax, b in zip(axes[0], batches):
        sub = df[(df.batch == b) & df.length.isin(spec.lengths)]
        for method, g in sub.groupby("method"):
            g = g.sort_values("length")
            ax.plot(g.length, g.shown_mb, "-", color=colors[method], label=method)
            m, p = g[g.status == "measured"], g[g.status != "measured"]
            ax.plot(m.length, m.shown_mb, "o", color=colors[method])
            ax.plot(p.length, p.shown_mb, "o", mfc="white", color=colors[method])
        ax.set_title(f"batch {b}")
        ax.set_xlabel("sequence length (tokens)")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("peak training memory (MB)")
    axes[0][0].legend(fontsize=8, title="filled = measured, hollow = predicted", title_fontsize=7)
    ref = df[(df.method == "contrastive") & (df.batch == spec.reference[0]) & (df.length == spec.reference[1])]
    if len(ref):
        r = ref.iloc[0]
        fig.suptitle(f"contrastive reference b{spec.reference[0]}/len{spec.reference[1]}: {r.shown_mb:,.0f} MB "
                     f"({r.status})", fontsize=9)
    fig.tight_layout()
    atomic.savefig(fig, path, dpi=120)
    plt.close(fig)

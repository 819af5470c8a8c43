"""Memory and step-time profile of training methods (the paper's Table 4), one configuration per subprocess.

Methods (a few real optimizer steps on synthetic token ids of exactly ``length`` tokens, no padding):

- ``regression_frozen``: stage 1 — encoder frozen (forward without grad), Smooth K2 on the head;
- ``regression_full``: stage 2 — everything trained, Smooth K2 on the head, AdamW;
- ``contrastive``: supervised SimCSE — anchor, positive and a hard negative per example (3 sequences),
  in-batch softmax over 2·batch candidates, everything trained, AdamW.

Peak memory: on CUDA ``torch.cuda.max_memory_allocated``; on CPU the process's peak RSS
(``ru_maxrss``) minus its RSS once the model is loaded, i.e. what training added. A configuration whose
predicted peak memory or step time exceeds the budget is not run; its prediction (marked ``predicted``) comes
from a least-squares cost model per method, ``peak = c0 + c1·B·L + c2·B·L²`` (activations linear in tokens,
attention scores quadratic in length, a constant for weights, gradients and optimizer state; the same form for
seconds per step), fitted with non-negative coefficients on the measured points; its error is the leave-one-out
error on those points. The grid runs cheapest first, so the big configurations are judged by a model fitted on
the small ones.

    python -m stsreg.profile one --method contrastive --batch 8 --length 32   # one measurement, JSON on stdout
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from dataclasses import dataclass

import numpy as np
from scipy.optimize import nnls

from stsreg import atomic
from stsreg.config import PROFILE_METHODS as METHODS  # params validation rejects any other name


def _rss_mb() -> float:
    """Current resident set size in MB (Linux /proc)."""
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * resource.getpagesize() / 2**20


def measure(backbone: str, method: str, batch: int, length: int, steps: int, device: str) -> dict:
    """Run ``steps`` training steps of ``method`` at (batch, length) in *this* process; returns peak MB and s/step.

    The first step warms up (allocator, kernels) and is not timed; the peak includes it.
    """
    import torch

    from stsreg.losses import InBatchContrastive, SmoothK2
    from stsreg.model import SiameseRegressor

    torch.manual_seed(0)
    dev = torch.device(device)
    model = SiameseRegressor.from_pretrained(backbone, max_length=length).to(dev)
    model.train()
    vocab = model.encoder.config.vocab_size
    if dev.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats(dev)
        base = torch.cuda.memory_allocated(dev) / 2**20
    else:
        base = _rss_mb()
    frozen = method == "regression_frozen"
    model.encoder.requires_grad_(not frozen)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-5)
    n_seq = 3 if method == "contrastive" else 2
    loss_fn = InBatchContrastive() if method == "contrastive" else SmoothK2(0.2, 3.0)
    gen = torch.Generator().manual_seed(0)

    def batch_features():
        ids = torch.randint(1000 if vocab > 1000 else 5, vocab, (batch, length), generator=gen)
        return {"input_ids": ids.to(dev), "attention_mask": torch.ones(batch, length, dtype=torch.long, device=dev)}

    times = []
    for step in range(steps + 1):
        feats = [batch_features() for _ in range(n_seq)]
        t0 = time.perf_counter()
        if frozen:
            with torch.no_grad():
                u, v = model.embed(feats[0]), model.embed(feats[1])
            loss = loss_fn(model.score_embeddings(u, v), torch.rand(batch, device=dev) * 2)
        elif method == "contrastive":
            loss = loss_fn(*(model.embed(f) for f in feats))
        else:
            loss = loss_fn(model(feats[0], feats[1])[2], torch.rand(batch, device=dev) * 5)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if dev.type == "cuda":
            torch.cuda.synchronize()
        if step:
            times.append(time.perf_counter() - t0)
    if dev.type == "cuda":
        peak = torch.cuda.max_memory_allocated(dev) / 2**20 - base
    else:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 - base  # ru_maxrss is in KB on Linux
    return {"method": method, "batch": batch, "length": length, "peak_mb": float(peak),
            "step_s": float(np.median(times)), "device": device, "status": "measured"}


def measure_in_subprocess(backbone: str, method: str, batch: int, length: int, steps: int, device: str,
                          timeout: float = 1800) -> dict:
    """:func:`measure` in a fresh Python process, so peaks of different configurations never mix."""
    cmd = [sys.executable, "-m", "stsreg.profile", "one", "--backbone", backbone, "--method", method, "--batch", str(batch),
           "--length", str(length), "--steps", str(steps), "--device", device]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        return {"method": method, "batch": batch, "length": length, "status": "failed",
                "error": proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _design(batch, length) -> np.ndarray:
    b, l = np.asarray(batch, float), np.asarray(length, float)
    return np.stack([np.ones_like(b), b * l, b * l * l], axis=-1)


@dataclass(frozen=True)
class CostModel:
    """``cost = c0 + c1·B·L + c2·B·L²`` with non-negative coefficients (peak MB or seconds per step);
    ``loo_error`` = mean absolute leave-one-out relative error on the measured points (nan with fewer than 4)."""

    coef: tuple[float, float, float]
    loo_error: float

    def predict(self, batch, length) -> np.ndarray:
        return _design(batch, length) @ np.asarray(self.coef)


def fit_cost_model(points: list[dict], key: str = "peak_mb") -> CostModel:
    """Fit ``key`` of measured ``{"batch", "length", key}`` points (at least 3)."""
    if len(points) < 3:
        raise ValueError(f"need at least 3 measured points to fit the cost model, got {len(points)}")
    X = _design([p["batch"] for p in points], [p["length"] for p in points])
    y = np.array([p[key] for p in points], float)
    coef, _ = nnls(X, y)
    errors = []
    if len(points) >= 4:
        for i in range(len(points)):
            keep = np.arange(len(points)) != i
            c, _ = nnls(X[keep], y[keep])
            errors.append(abs(X[i] @ c - y[i]) / max(abs(y[i]), 1e-9))
    return CostModel(tuple(float(c) for c in coef), float(np.mean(errors)) if errors else float("nan"))


@dataclass(frozen=True)
class GridSpec:
    """What to profile. ``headline`` = (batch, length) of regression for ``memory_ratio``; ``reference`` = the
    contrastive point it is divided by (the paper's SimCSE batch 512, length 100). Configurations predicted over
    ``memory_budget_mb`` or ``max_step_s`` are not run."""

    methods: tuple[str, ...]
    batch_sizes: tuple[int, ...]
    lengths: tuple[int, ...]
    headline: tuple[int, int] = (64, 256)
    reference: tuple[int, int] = (512, 100)
    memory_budget_mb: float = 8000.0
    max_step_s: float = 30.0

    def configs(self, method: str) -> list[tuple[int, int]]:
        """(batch, length) pairs of one method, cheapest first (so the cost model exists before the big ones)."""
        pts = {(b, l) for b in self.batch_sizes for l in self.lengths}
        if method == "contrastive":
            pts.add(self.reference)
        if method.startswith("regression"):
            pts.add(self.headline)
        return sorted(pts, key=lambda bl: (bl[0] * bl[1] * (1 + bl[1] / 256), bl))


def run_grid(spec: GridSpec, measure, log=lambda row: None) -> list[dict]:
    """Run every configuration of ``spec`` through ``measure(method, batch, length) -> row`` unless the cost
    models fitted on what already ran (>= 3 points of that method) predict it over budget; those rows get
    ``status="predicted"``. Every row then gets ``predicted_mb`` / ``predicted_step_s`` from the final models
    fitted on all measured points of its method. Returns rows; ``log(row)`` sees each as it is decided."""
    rows = []
    for method in spec.methods:
        measured: list[dict] = []
        for batch, length in spec.configs(method):
            if len(measured) >= 3:
                mem = float(fit_cost_model(measured).predict(batch, length))
                sec = float(fit_cost_model(measured, "step_s").predict(batch, length))
                if mem > spec.memory_budget_mb or sec > spec.max_step_s:
                    row = {"method": method, "batch": batch, "length": length, "status": "predicted",
                           "reason": f"predicted {mem:.0f} MB, {sec:.1f} s/step over budget "
                                     f"({spec.memory_budget_mb:.0f} MB, {spec.max_step_s:.0f} s)"}
                    rows.append(row)
                    log(row)
                    continue
            row = measure(method, batch, length)
            rows.append(row)
            log(row)
            if row["status"] == "measured":
                measured.append(row)
        _attach_predictions([r for r in rows if r["method"] == method], measured)
    return rows


def _attach_predictions(rows: list[dict], measured: list[dict]) -> None:
    if len(measured) < 3:
        return
    mem, sec = fit_cost_model(measured), fit_cost_model(measured, "step_s")
    for r in rows:
        r["predicted_mb"] = float(mem.predict(r["batch"], r["length"]))
        r["predicted_step_s"] = float(sec.predict(r["batch"], r["length"]))
        r["fit_loo_error"] = mem.loo_error


def peak_of(rows: list[dict], method: str, batch: int, length: int) -> tuple[float, bool]:
    """(peak MB, is_predicted) of one configuration: measured if it ran, else the cost model's prediction."""
    for r in rows:
        if (r["method"], r["batch"], r["length"]) == (method, batch, length):
            if r["status"] == "measured":
                return r["peak_mb"], False
            if "predicted_mb" in r:
                return r["predicted_mb"], True
    return float("nan"), True


def summarize(rows: list[dict], spec: GridSpec) -> dict:
    """The headline metrics: ``memory_ratio`` = peak(regression_full, headline) / peak(contrastive, reference)."""
    reg, reg_pred = peak_of(rows, "regression_full", *spec.headline)
    ref, ref_pred = peak_of(rows, "contrastive", *spec.reference)
    out = {"memory_ratio": reg / ref if ref == ref and ref > 0 else float("nan"),
           "regression_full_headline_mb": reg, "contrastive_reference_mb": ref,
           "headline_predicted": int(reg_pred), "reference_predicted": int(ref_pred),
           "measured_configs": sum(r["status"] == "measured" for r in rows),
           "predicted_configs": sum(r["status"] == "predicted" for r in rows)}
    frozen, _ = peak_of(rows, "regression_frozen", *spec.headline)
    out["regression_frozen_headline_mb"] = frozen
    for method in spec.methods:
        errs = [r["fit_loo_error"] for r in rows if r["method"] == method and "fit_loo_error" in r]
        if errs:
            out[f"{method}_fit_loo_error"] = errs[0]
    return out


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
    lines = [f"Device: {device}. Peak = training memory above the loaded model ({'CUDA max_memory_allocated' if device != 'cpu' else 'CPU peak RSS'}); "
             f"predicted = cost model c0 + c1·B·L + c2·B·L² fitted on the measured points of the method.", "",
             f"| method | batch | length | status | peak MB | predicted MB | ratio to contrastive b{b}/len{l} | s/step | predicted s/step |",
             "|---|---:|---:|---|---:|---:|---:|---:|---:|"]

    def f(x, fmt):
        return "–" if x != x else format(x, fmt)

    for r in df.itertuples():
        mark = "**" if (r.batch, r.length) in (spec.headline, spec.reference) and r.method in ("regression_full", "contrastive") else ""
        lines.append(f"| {mark}{r.method}{mark} | {r.batch} | {r.length} | {r.status} | {f(r.peak_mb, '.0f')} | "
                     f"{f(r.predicted_mb, '.0f')} | {f(r.ratio_to_reference, '.3f')} | {f(r.step_s, '.3f')} | {f(r.predicted_step_s, '.3f')} |")
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


def _cli(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m stsreg.profile", description="Measure one profile configuration.")
    sub = ap.add_subparsers(dest="cmd", required=True)
    one = sub.add_parser("one", help="one configuration in this process; prints JSON")
    one.add_argument("--backbone", default="default")
    one.add_argument("--method", choices=METHODS, required=True)
    one.add_argument("--batch", type=int, required=True)
    one.add_argument("--length", type=int, required=True)
    one.add_argument("--steps", type=int, default=3)
    one.add_argument("--device", default="cpu")
    a = ap.parse_args(argv)
    print(json.dumps(measure(a.backbone, a.method, a.batch, a.length, a.steps, a.device)))
    return 0


if __name__ == "__main__":
    sys.exit(_cli())

"""The profile grid: which (method, batch, length) configurations run, cheapest first, and which are only predicted
(over the memory or step-time budget by the cost model fitted on the smaller ones); the headline ``memory_ratio``.
"""

from __future__ import annotations

from dataclasses import dataclass

from stsreg.experiments.profiling.costmodel import fit_cost_model
from stsreg.infra.method_specs import PROFILE


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
        loss = PROFILE[method].loss
        if loss == "contrastive":
            pts.add(self.reference)
        if loss == "regression":
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

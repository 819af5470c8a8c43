"""Profile measurements in subprocesses on a tiny model, the cost model fit, and the grid's skip logic."""

import numpy as np
import pytest

from stsreg.experiments.profiling.costmodel import CostModel, fit_cost_model
from stsreg.experiments.profiling.grid import GridSpec, run_grid, summarize
from stsreg.experiments.profiling.measure import measure_in_subprocess


def test_memory_model_recovers_known_coefficients_and_reports_loo_error():
    grid = [(b, l) for b in (4, 8, 16) for l in (32, 64, 128)]
    truth = CostModel((300.0, 0.5, 0.002), float("nan"))
    points = [{"batch": b, "length": l, "peak_mb": float(truth.predict(b, l))} for b, l in grid]
    fit = fit_cost_model(points)
    assert np.allclose(fit.coef, truth.coef, rtol=1e-6) and fit.loo_error < 1e-6
    noisy = [{**p, "peak_mb": p["peak_mb"] * (1.05 if i % 2 else 0.95)} for i, p in enumerate(points)]
    assert 0 < fit_cost_model(noisy).loo_error < 0.2
    with pytest.raises(ValueError, match="at least 3"):
        fit_cost_model(points[:2])


@pytest.mark.parametrize("method", ["regression_frozen", "regression_full", "contrastive"])
def test_one_configuration_runs_in_its_own_process(tiny_backbone, method):
    out = measure_in_subprocess(tiny_backbone, method, batch=4, length=16, steps=2, device="cpu", timeout=300)
    assert out["status"] == "measured", out
    assert out["batch"] == 4 and out["length"] == 16 and out["peak_mb"] >= 0 and out["step_s"] > 0


def test_a_failing_configuration_is_reported_not_raised(tiny_backbone):
    out = measure_in_subprocess(tiny_backbone, "contrastive", batch=2, length=4096, steps=1, device="cpu", timeout=300)
    assert out["status"] == "failed" and out["error"]  # longer than the tiny model's 64 positions


def test_grid_runs_cheapest_first_and_predicts_what_would_not_fit():
    truth = CostModel((100.0, 2.0, 0.01), float("nan"))
    ran = []

    def fake_measure(method, batch, length):  # a pure function of (B, L): the grid logic is what is under test
        ran.append((method, batch, length))
        return {"method": method, "batch": batch, "length": length, "status": "measured",
                "peak_mb": float(truth.predict(batch, length)), "step_s": batch * length / 1000}

    spec = GridSpec(("regression_full", "contrastive"), (8, 32), (32, 64, 128, 256), headline=(64, 256),
                    reference=(512, 100), memory_budget_mb=5000, max_step_s=100)
    rows = run_grid(spec, fake_measure)
    by = {(r["method"], r["batch"], r["length"]): r for r in rows}
    # over budget (truth: b512/len100 -> 153,700 MB; b64/len256 -> 74,868 MB) -> predicted, never run
    assert by[("contrastive", 512, 100)]["status"] == "predicted" and ("contrastive", 512, 100) not in ran
    assert by[("regression_full", 64, 256)]["status"] == "predicted"
    assert ("regression_full", 8, 32) in ran and ("regression_full", 32, 256) not in ran  # 32·256 -> 18,612 MB
    assert np.isclose(by[("contrastive", 512, 100)]["predicted_mb"], truth.predict(512, 100), rtol=1e-6)
    assert ran[0][1:] == (8, 32)  # cheapest first
    s = summarize(rows, spec)
    assert np.isclose(s["memory_ratio"], truth.predict(64, 256) / truth.predict(512, 100), rtol=1e-6)
    assert s["headline_predicted"] == 1 and s["reference_predicted"] == 1


def test_failed_configurations_do_not_feed_the_cost_model():
    def measure(method, batch, length):
        if length == 64:
            return {"method": method, "batch": batch, "length": length, "status": "failed", "error": "out of memory"}
        return {"method": method, "batch": batch, "length": length, "status": "measured",
                "peak_mb": 10.0 + batch * length, "step_s": 0.01}

    rows = run_grid(GridSpec(("contrastive",), (2, 4), (16, 32, 64), reference=(8, 16)), measure)
    assert [r["status"] for r in rows if r["length"] == 64] == ["failed", "failed"]
    assert all("predicted_mb" in r for r in rows)

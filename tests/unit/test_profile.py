"""Profile measurements in subprocesses on a tiny model, and the memory model fit."""

import numpy as np
import pytest

from stsreg.profile import MemoryModel, fit_memory_model, measure_in_subprocess


def test_memory_model_recovers_known_coefficients_and_reports_loo_error():
    grid = [(b, l) for b in (4, 8, 16) for l in (32, 64, 128)]
    truth = MemoryModel((300.0, 0.5, 0.002), float("nan"))
    points = [{"batch": b, "length": l, "peak_mb": float(truth.predict(b, l))} for b, l in grid]
    fit = fit_memory_model(points)
    assert np.allclose(fit.coef, truth.coef, rtol=1e-6) and fit.loo_error < 1e-6
    noisy = [{**p, "peak_mb": p["peak_mb"] * (1.05 if i % 2 else 0.95)} for i, p in enumerate(points)]
    assert 0 < fit_memory_model(noisy).loo_error < 0.2
    with pytest.raises(ValueError, match="at least 3"):
        fit_memory_model(points[:2])


@pytest.mark.parametrize("method", ["regression_frozen", "regression_full", "contrastive"])
def test_one_configuration_runs_in_its_own_process(tiny_backbone, method):
    out = measure_in_subprocess(tiny_backbone, method, batch=4, length=16, steps=2, device="cpu", timeout=300)
    assert out["status"] == "measured", out
    assert out["batch"] == 4 and out["length"] == 16 and out["peak_mb"] >= 0 and out["step_s"] > 0


def test_a_failing_configuration_is_reported_not_raised(tiny_backbone):
    out = measure_in_subprocess(tiny_backbone, "contrastive", batch=2, length=4096, steps=1, device="cpu", timeout=300)
    assert out["status"] == "failed" and out["error"]  # longer than the tiny model's 64 positions

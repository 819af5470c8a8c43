"""The cost model that predicts configurations the grid does not run: per method,
``cost = c0 + c1·B·L + c2·B·L²`` (activations linear in tokens, attention scores quadratic in length, a constant for
weights, gradients and optimizer state), fitted with non-negative coefficients; the same form for seconds per step.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import nnls


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

"""Bootstrap uncertainty for STS scores, resampling pairs with ``scipy.stats.bootstrap``.

- :func:`spearman_ci`: 95% interval of one model's Spearman x100 on one task, or of its mean over tasks (avg7).
- :func:`paired_test`: difference ``a - b`` of two models scored on the *same* pairs; both are recomputed on
  the same resampled pairs, so the pair-to-pair difficulty cancels. Over several tasks (avg7) each task is
  resampled on its own and the statistic is the mean of the per-task differences.

The p-value is one-sided, ``P*(diff <= 0)`` under the bootstrap distribution: the evidence that ``a`` is
*better* than ``b`` (what a promotion gate asks).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
from scipy.stats import bootstrap, rankdata


def _spearman_rows(gold: np.ndarray, pred: np.ndarray, axis: int = -1) -> np.ndarray:
    """Row-wise Spearman x100 of (..., n) arrays (average ranks for ties, as scipy's spearmanr)."""
    rg, rp = rankdata(gold, axis=-1), rankdata(pred, axis=-1)
    rg = rg - rg.mean(-1, keepdims=True)
    rp = rp - rp.mean(-1, keepdims=True)
    den = np.sqrt((rg * rg).sum(-1) * (rp * rp).sum(-1))
    return 100 * (rg * rp).sum(-1) / np.where(den == 0, np.nan, den)


def _task_bootstrap(tasks: list[tuple[np.ndarray, ...]], stat, n_resamples: int, seed: int, confidence: float):
    """Resample the pairs of each task independently; ``stat(*arrays)`` (row-wise, x100) averaged over tasks.

    Returns (point estimate on all pairs, low, high, bootstrap distribution).
    """
    tasks = [tuple(np.asarray(x, float) for x in t) for t in tasks]
    for t in tasks:
        if len({len(x) for x in t}) != 1:
            raise ValueError("every array of a task must score the same pairs")

    def mean_stat(*idx, axis=-1):  # idx: one (..., n_t) array of resampled pair indices per task
        return np.mean([stat(*(x[i] for x in t)) for t, i in zip(tasks, idx)], axis=0)

    data = tuple(np.arange(len(t[0])) for t in tasks)
    res = bootstrap(data, mean_stat, paired=False, vectorized=True, n_resamples=n_resamples,
                    confidence_level=confidence,
                    method="percentile", rng=np.random.default_rng(seed), batch=100)
    return (
        float(mean_stat(*data)),
        float(res.confidence_interval.low),
        float(res.confidence_interval.high),
        res.bootstrap_distribution,
    )


def spearman_ci(tasks: list[tuple[np.ndarray, np.ndarray]], n_resamples: int = 1000, seed: int = 0,
                confidence: float = 0.95) -> tuple[float, float]:
    """Interval of the mean over tasks of Spearman x100; one ``(gold, pred)`` pair of (n_t,) arrays per task
    (one task: that task's interval; seven: avg7's). (nan, nan) when a task has fewer than 3 pairs (e.g. the unseen
    view of a small test set): there is nothing to resample."""
    if any(len(t[0]) < 3 for t in tasks):
        return float("nan"), float("nan")
    _, low, high, _ = _task_bootstrap(tasks, _spearman_rows, n_resamples, seed, confidence)
    return low, high


@dataclass(frozen=True)
class PairedResult:
    """``diff`` = score(a) - score(b) (x100, point estimate on all pairs), its interval and one-sided p-value."""

    diff: float
    low: float
    high: float
    p_value: float
    n_resamples: int
    pairs: int | None = None  # the test pairs compared, where the caller counted them

    def significant(self, alpha: float) -> bool:
        return self.p_value < alpha

    def as_dict(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None}


def paired_test(tasks: list[tuple[np.ndarray, np.ndarray, np.ndarray]], n_resamples: int = 1000, seed: int = 0,
                confidence: float = 0.95) -> PairedResult:
    """Paired bootstrap of the mean over tasks of ``spearman(gold, a) - spearman(gold, b)``.

    tasks: one ``(gold, a, b)`` triple of (n_t,) arrays per task, a and b scoring the same pairs in the same order.
    """
    point, low, high, dist = _task_bootstrap(tasks, lambda g, a, b: _spearman_rows(g, a) - _spearman_rows(g, b),
                                             n_resamples, seed, confidence)
    return PairedResult(diff=point, low=low, high=high, p_value=float((np.sum(dist <= 0) + 1) / (len(dist) + 1)),
                        n_resamples=n_resamples)

"""How a baseline system is scored: the 7-task protocol on its own similarity, and the study's STS-B test view
(Pearson x100 with a pair-bootstrap interval, MSE of the score against label / 5)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.stats import bootstrap

from stsreg.experiments.baselines.scoring import PairScorer
from stsreg.infra import public_tables
from stsreg.infra.config import Params
from stsreg.product.sts_eval import eval_pairs, intervals, task_metrics


def _pearson_rows(gold: np.ndarray, pred: np.ndarray, axis: int = -1) -> np.ndarray:
    g = gold - gold.mean(axis, keepdims=True)
    q = pred - pred.mean(axis, keepdims=True)
    return 100 * (g * q).sum(axis) / np.sqrt((g * g).sum(axis) * (q * q).sum(axis))


def pearson_ci(gold, pred, n_resamples: int, seed: int, confidence: float) -> tuple[float, float]:
    """Pair-bootstrap interval of Pearson x100 (scipy's ``bootstrap``, paired resampling, percentile)."""
    res = bootstrap((np.asarray(gold, float), np.asarray(pred, float)), _pearson_rows, paired=True, vectorized=True,
                    n_resamples=n_resamples, confidence_level=confidence, method="percentile",
                    rng=np.random.default_rng(seed))
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def score_table(model: PairScorer, sts: pd.DataFrame, batch_size: int = 64) -> pd.DataFrame:
    """The evaluation pairs (7 test sets + STS-B dev) with ``cosine`` = the system's similarity (the column the
    evaluation reads; a cross-encoder's sigmoid score for cross-encoders) and ``prediction`` = 5 x score clipped to
    0-5 (the served estimate of a system trained on label / 5)."""
    pairs = eval_pairs(sts)
    scores = model.score(pairs.sentence1.tolist(), pairs.sentence2.tolist(), batch_size)
    return pairs.assign(cosine=scores, prediction=np.clip(5 * scores, 0, 5))


def metrics_of(scored: pd.DataFrame, params: Params) -> dict[str, float]:
    """7-task metrics + intervals (:mod:`stsreg.product.sts_eval`), and the study's STS-B test view: Pearson interval
    and ``stsb_mse01`` (MSE of the score against label / 5)."""
    e = params.evaluate
    out = task_metrics(scored)
    out.update(intervals(scored, e.n_resamples, params.seed, e.confidence))
    table = public_tables.BASELINES_TABLE  # the study's benchmark (STS-B): its test split's view
    test = scored[scored.task == table]
    out[f"{table}_pearson_low"], out[f"{table}_pearson_high"] = pearson_ci(test.score, test.cosine, e.n_resamples,
                                                                           params.seed, e.confidence)
    out[f"{table}_mse01"] = float(np.mean((test.cosine - test.score / 5.0) ** 2))
    return out

"""Bootstrap intervals and the paired test: point estimates equal scipy's, intervals bracket them, the paired
test finds a real gain and rejects a null one."""

import numpy as np
import pytest
from scipy.stats import spearmanr

from stsreg.product.bootstrap_ci import _spearman_rows, paired_test, spearman_ci


def _data(n=800, seed=0):
    r = np.random.default_rng(seed)
    gold = r.integers(0, 6, n).astype(float)
    good = gold + r.normal(0, 0.8, n)      # Spearman ~0.9
    bad = gold + r.normal(0, 2.5, n)       # Spearman ~0.55
    return gold, good, bad


def test_rowwise_spearman_equals_scipy_with_ties():
    gold, good, _ = _data()
    assert _spearman_rows(gold, good) == pytest.approx(spearmanr(gold, good).statistic * 100, abs=1e-9)
    stacked = _spearman_rows(np.vstack([gold, gold]), np.vstack([good, -good]))
    assert stacked[0] == pytest.approx(-stacked[1])


def test_ci_brackets_the_estimate_and_narrows_with_more_pairs():
    gold, good, _ = _data(400)
    lo, hi = spearman_ci([(gold, good)], n_resamples=500)
    point = spearmanr(gold, good).statistic * 100
    assert lo < point < hi
    gold2, good2, _ = _data(4000)
    lo2, hi2 = spearman_ci([(gold2, good2)], n_resamples=500)
    assert hi2 - lo2 < (hi - lo) * 0.6  # ~1/sqrt(10) narrower
    # several tasks: the interval of their mean
    lo7, hi7 = spearman_ci([(gold, good), (gold2, good2)], n_resamples=300)
    assert lo7 < (point + spearmanr(gold2, good2).statistic * 100) / 2 < hi7


def test_paired_test_detects_a_real_gain_and_not_a_null_one():
    gold, good, bad = _data()
    real = paired_test([(gold, good, bad)], n_resamples=500)
    assert real.diff > 20 and real.low > 0 and real.p_value < 0.01 and real.significant(0.05)
    worse = paired_test([(gold, bad, good)], n_resamples=500)
    assert worse.diff < 0 and worse.p_value > 0.99
    same = paired_test([(gold, good, good.copy())], n_resamples=200)
    assert same.diff == 0 and same.p_value == 1.0 and not same.significant(0.05)


def test_paired_test_rejects_unpaired_input():
    gold, good, bad = _data()
    with pytest.raises(ValueError, match="same pairs"):
        paired_test([(gold, good, bad[:-1])])


def test_interval_of_a_task_with_under_three_pairs_is_nan():
    from stsreg.product.bootstrap_ci import spearman_ci

    low, high = spearman_ci([(np.array([1.0, 2.0]), np.array([0.1, 0.3]))], n_resamples=50)
    assert np.isnan(low) and np.isnan(high)

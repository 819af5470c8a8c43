"""Evaluation metrics: names, the 'all' concatenation for STS12-16, subsets, the unseen view, intervals."""

import numpy as np
import pytest
from scipy.stats import pearsonr, spearmanr

from stsreg.product.data.catalogue import EVAL_TASKS
from stsreg.product.sts_eval import eval_pairs, format_table, intervals, score_pairs, task_metrics
from stsreg.product.model import SiameseRegressor
from tests.conftest import tiny_eval_table


@pytest.fixture(scope="module")
def scored(tiny_backbone):
    model = SiameseRegressor.from_pretrained(tiny_backbone, max_length=16)
    return score_pairs(model, eval_pairs(tiny_eval_table()), batch_size=16, show_progress=False)


def test_score_pairs_adds_cosine_and_head(scored):
    assert len(scored) == 8 * 60 and set(scored.task) == set(EVAL_TASKS) | {"stsb_dev"}
    assert scored.cosine.between(-1.0001, 1.0001).all() and np.isfinite(scored.prediction).all()


def test_task_metrics_follow_the_protocol(scored):
    m = task_metrics(scored)
    for task in EVAL_TASKS:
        t = scored[scored.task == task]
        # one Spearman over the concatenated subsets, not their average
        assert m[f"{task}_spearman"] == pytest.approx(spearmanr(t.cosine, t.score).statistic * 100)
        assert m[f"{task}_pearson"] == pytest.approx(pearsonr(t.cosine, t.score).statistic * 100)
        assert m[f"{task}_prediction_spearman"] == pytest.approx(spearmanr(t.prediction, t.score).statistic * 100)
        assert m[f"{task}_prediction_mae"] == pytest.approx((t.prediction - t.score).abs().mean())
        u = t[~t.seen_in_train]
        assert m[f"{task}_unseen_spearman"] == pytest.approx(spearmanr(u.cosine, u.score).statistic * 100)
        assert m[f"{task}_unseen_pairs"] == 40 and m[f"{task}_pairs"] == 60
    s = scored[(scored.task == "sts12") & (scored.subset == "A")]
    assert m["sts12_a_spearman"] == pytest.approx(spearmanr(s.cosine, s.score).statistic * 100)
    assert "sickr_a_spearman" not in m  # SICK-R is one set
    assert m["avg7_spearman"] == pytest.approx(np.mean([m[f"{t}_spearman"] for t in EVAL_TASKS]))
    dev = scored[scored.task == "stsb_dev"]
    assert m["stsb_dev_spearman"] == pytest.approx(spearmanr(dev.cosine, dev.score).statistic * 100)


def test_intervals_bracket_every_score_and_table_prints(scored):
    m = task_metrics(scored)
    m.update(intervals(scored, n_resamples=200))
    for key in [f"{t}_spearman" for t in (*EVAL_TASKS, "avg7")] + [f"{t}_unseen_spearman"
                                                                   for t in (*EVAL_TASKS, "avg7")]:
        assert m[key + "_low"] <= m[key] <= m[key + "_high"], key
    table = format_table(m)
    assert "| SICK-R |" in table and "| avg7 |" in table and "40/60" in table


def test_missing_task_is_an_error(scored):
    with pytest.raises(ValueError, match="no test pairs for sickr"):
        task_metrics(scored[scored.task != "sickr"])


def test_the_metric_key_set_is_pinned(scored):
    """Exactly these keys, no more (a new metric is a deliberate change of this list); the primary one first."""
    from stsreg.product.sts_eval import PRIMARY_METRIC
    from stsreg.product.runners.eval_runner import HEADLINE

    m = task_metrics(scored)
    m.update(intervals(scored, 50, 0, 0.95))
    per_task = ("pairs", "pearson", "prediction_mae", "prediction_spearman", "spearman", "spearman_high",
                "spearman_low",
                "unseen_pairs", "unseen_spearman", "unseen_spearman_high", "unseen_spearman_low")
    subsets = {f"{t}_{s.lower()}_spearman" for t, s in scored[scored.task != "stsb_dev"][["task",
                                                                                          "subset"]].drop_duplicates()
               .itertuples(index=False) if t != "sickr" and scored[scored.task == t].subset.nunique() > 1}
    expected = ({f"{t}_{k}" for t in EVAL_TASKS for k in per_task} | subsets | {"stsb_dev_spearman"} |
                {f"avg7_{k}" for k in ("pearson", "prediction_mae", "prediction_spearman", "spearman", "spearman_high",
                                       "spearman_low", "unseen_spearman", "unseen_spearman_high",
                                       "unseen_spearman_low")})
    assert set(m) == expected
    assert PRIMARY_METRIC == HEADLINE[0] == "avg7_spearman" and set(HEADLINE) <= expected

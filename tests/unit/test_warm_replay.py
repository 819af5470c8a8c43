"""A warm retrain's replay (:func:`stsreg.product.training.replay.replayed`): which rows are new to the champion,
how many of its own are trained again, and that rows are told apart by content alone."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from stsreg.infra.config import load_params
from stsreg.infra.errors import ParamsError
from stsreg.infra.settings_training import Stage2WarmStartParams
from stsreg.product.model_files import TRAIN_ROWS
from stsreg.product.runners.warm_start import champion_rows
from stsreg.product.training.replay import replayed, row_hashes


def _rows(n: int, start: int = 0, dataset: str = "qa") -> pd.DataFrame:
    return pd.DataFrame({"dataset": dataset, "sentence1": [f"question {i}" for i in range(start, start + n)],
                         "sentence2": [f"answer {i}" for i in range(start, start + n)],
                         "score": [i % 6 for i in range(start, start + n)], "split": "train",
                         "line": range(start, start + n)})


def _warm(task_replay: float = 2.0, other_replay: float = 4.0):
    return Stage2WarmStartParams(task_replay=task_replay, other_replay=other_replay)


def test_every_new_row_trains_with_a_replay_sized_from_the_new_rows():
    old, new = _rows(200), _rows(30, start=200)
    today = pd.concat([old.iloc[:100], new, old.iloc[100:]], ignore_index=True)  # appended rows need not be last
    train, rows = replayed(today, row_hashes(old), _warm(task_replay=2.0), "qa", 0, seed=42)
    assert rows == {"new": 30, "replayed": 60, "old": 200, "task": {"table": "qa", "replayed": 60, "old": 200,
                                                                   "per_new": 2.0},
                    "other": {"replayed": 0, "old": 0, "per_new": 4.0}}
    assert set(new.sentence1) <= set(train.sentence1) and len(train) == 90
    again, _ = replayed(today, row_hashes(old), _warm(task_replay=2.0), "qa", 0, seed=42)
    pd.testing.assert_frame_equal(train, again)  # the seed draws the same replay
    only_new, rows = replayed(today, row_hashes(old), _warm(0.0, 0.0), "qa", 0, seed=42)
    assert rows["replayed"] == 0 and set(only_new.sentence1) == set(new.sentence1)


def test_a_rounds_rows_follow_the_arrival_not_the_table():
    """On a 10,000-row task table, 100 and then 200 arriving rows train 100 * (1 + 2 + 4) and 200 * 7 rows: the replay
    is sized from the arrival, and at most every old row of a table is replayed."""
    public, task = _rows(3000, start=50_000, dataset="stsb"), _rows(10_000)
    seen = row_hashes(pd.concat([public, task]))
    sizes = []
    for n in (100, 200):
        today = pd.concat([public, task, _rows(n, start=90_000)], ignore_index=True)
        train, rows = replayed(today, seen, _warm(), "qa", 0, seed=0)
        assert rows["task"]["replayed"] == 2 * n and rows["other"]["replayed"] == 4 * n
        assert (train.dataset == "stsb").sum() == 4 * n and len(train) == 7 * n
        sizes.append(len(train))
    assert sizes == [700, 1400]
    few = pd.concat([public.iloc[:10], task.iloc[:30], _rows(100, start=90_000)], ignore_index=True)
    _, rows = replayed(few, seen, _warm(), "qa", 0, seed=0)
    assert rows["task"]["replayed"] == 30 and rows["other"]["replayed"] == 10  # all there is


def test_the_cap_bounds_the_new_rows_and_the_replay_follows_the_capped_draw():
    old, new = _rows(500), _rows(120, start=500)
    train, rows = replayed(pd.concat([old, new], ignore_index=True), row_hashes(old), _warm(task_replay=0.5), "qa",
                           100, seed=1)
    assert rows["new"] == 100 and rows["task"]["replayed"] == 50 and len(train) == 150


def test_with_no_row_new_every_row_trains_again_and_the_counts_say_why():
    old = _rows(50)
    train, rows = replayed(old, row_hashes(old), _warm(), "qa", 0, seed=3)
    assert rows == {"new": 0, "replayed": 50, "old": 50,
                    "why": "no row is new to the champion: every row trained again"} and len(train) == 50


def test_a_row_is_its_content_not_its_position():
    """The line a row came from and its order do not matter; the table, the sentences and the score do."""
    a = _rows(5)
    moved = a.iloc[::-1].assign(line=range(100, 105))
    assert np.array_equal(row_hashes(a), row_hashes(moved))
    rescored = a.assign(score=a.score + 0.5)
    other_table = a.assign(dataset="reviews")
    assert not np.isin(row_hashes(rescored), row_hashes(a)).any()
    assert not np.isin(row_hashes(other_table), row_hashes(a)).any()
    assert row_hashes(a).dtype == np.uint64 and list(row_hashes(a)) == sorted(row_hashes(a))
    # a champion's train_rows.npy is read by later retrains, on other machines and library versions: the values hold
    assert row_hashes(_rows(2)).tolist() == [9523180815909296499, 17831688962980457376]


def test_a_champions_rows_that_cannot_be_used_are_named_and_nothing_is_trained_on_them(tmp_path):
    """A missing, truncated, pickled or mistyped ``train_rows.npy``: no hashes, and a reason that names the file
    (the warm start then replays every row and says why in ``started_from.replay_why``)."""
    assert champion_rows(tmp_path) == (None, f"has no {TRAIN_ROWS} (trained before rows were kept)")
    kept = row_hashes(_rows(4))
    np.save(tmp_path / TRAIN_ROWS, kept)
    seen, why = champion_rows(tmp_path)
    assert np.array_equal(seen, kept) and why == ""
    (tmp_path / TRAIN_ROWS).write_bytes((tmp_path / TRAIN_ROWS).read_bytes()[:70])  # cut short
    seen, why = champion_rows(tmp_path)
    assert seen is None and why.startswith(f"has an unreadable {TRAIN_ROWS} (")
    np.save(tmp_path / TRAIN_ROWS, np.array([{"a": 1}], dtype=object))  # a pickle: never loaded
    seen, why = champion_rows(tmp_path)
    assert seen is None and why.startswith(f"has an unreadable {TRAIN_ROWS} (")
    np.save(tmp_path / TRAIN_ROWS, np.arange(4.0))
    assert champion_rows(tmp_path) == (None, f"has a {TRAIN_ROWS} of float64 (4,), not (n,) uint64 row hashes")


def test_a_negative_replay_is_refused_naming_the_key(tmp_path):
    from tests.conftest import REPO

    text = (REPO / "params.yaml").read_text().replace("    task_replay: 2.0 ", "    task_replay: -1 ")
    assert "task_replay: -1" in text
    (tmp_path / "params.yaml").write_text(text)
    with pytest.raises(ParamsError, match="stage2.warm_start.task_replay: expected a value"):
        load_params(tmp_path / "params.yaml")


def test_a_warm_retrain_is_evaluated_evals_times_whatever_its_length():
    from stsreg.product.runners.stage2_runner import warm_eval_every

    p = load_params().stage2  # batch 16; the warm start's 10 evaluations
    warm = p.__class__(**{**p.__dict__, "epochs": 1})
    assert warm_eval_every(2935, warm) == 19  # 184 steps: every 19 (the cold eval_every, 200, would judge it once)
    assert warm_eval_every(160, warm) == 1 and warm_eval_every(1, warm) == 1
    two = p.__class__(**{**p.__dict__, "epochs": 2})
    assert warm_eval_every(1600, two) == 20

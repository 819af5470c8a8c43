"""A warm retrain's replay (:func:`stsreg.product.training.replay.replayed`): which rows are new to the champion,
how many of its own are trained again, and that rows are told apart by content alone."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from stsreg.product.training.replay import replayed, row_hashes


def _rows(n: int, start: int = 0, dataset: str = "qa") -> pd.DataFrame:
    return pd.DataFrame({"dataset": dataset, "sentence1": [f"question {i}" for i in range(start, start + n)],
                         "sentence2": [f"answer {i}" for i in range(start, start + n)],
                         "score": [i % 6 for i in range(start, start + n)], "split": "train",
                         "line": range(start, start + n)})


def test_every_new_row_trains_with_the_replayed_fraction_of_the_old():
    old, new = _rows(200), _rows(30, start=200)
    today = pd.concat([old.iloc[:100], new, old.iloc[100:]], ignore_index=True)  # appended rows need not be last
    train, rows = replayed(today, row_hashes(old), 0.25, 0, seed=42)
    assert rows == {"new": 30, "replayed": 50, "old": 200, "replay": 0.25}
    assert set(new.sentence1) <= set(train.sentence1) and len(train) == 80
    again, _ = replayed(today, row_hashes(old), 0.25, 0, seed=42)
    pd.testing.assert_frame_equal(train, again)  # the seed draws the same replay
    only_new, rows = replayed(today, row_hashes(old), 0.0, 0, seed=42)
    assert rows["replayed"] == 0 and set(only_new.sentence1) == set(new.sentence1)


def test_the_cap_bounds_the_new_rows_and_the_old_rows_replay_is_a_fraction_of_the_capped_draw():
    old, new = _rows(500), _rows(120, start=500)
    train, rows = replayed(pd.concat([old, new], ignore_index=True), row_hashes(old), 0.5, 100, seed=1)
    assert rows == {"new": 100, "replayed": 50, "old": 500, "replay": 0.5} and len(train) == 150


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


@pytest.mark.parametrize("replay", [1.0, 0.6])
def test_nothing_new_replays_the_fraction_of_the_old(replay):
    old = _rows(50)
    train, rows = replayed(old, row_hashes(old), replay, 0, seed=3)
    assert rows["new"] == 0 and len(train) == round(replay * 50)

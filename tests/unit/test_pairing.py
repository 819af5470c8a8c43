"""The promotion gate pairs two models' predictions by the pairs' content, never by file and line: a test file
with rows inserted at its top, or reordered, still pairs each pair with its twin; a table that misses today's pairs
is refused (or re-scored), never compared with other pairs."""

import numpy as np
import pandas as pd
import pytest

from stsreg.product.data.catalogue import EVAL_TASKS
from stsreg.product.sts_eval import CoverageError, paired_on_predictions


def _predictions(seed: int, n: int = 60, offset: int = 0, dup: bool = True) -> pd.DataFrame:
    """A predictions table (the evaluation's predictions.parquet columns) over the 7 tasks; ``offset`` shifts
    every line number as 100 rows inserted at the top of each file would."""
    rng = np.random.default_rng(0)
    rows = []
    for task in EVAL_TASKS:
        gold = rng.uniform(0, 5, n).round(1)
        for i in range(n):
            rows.append({"task": task, "dataset": task, "subset": "all", "file": f"{task}.tsv", "line": i + 1 + offset,
                         "sentence1": f"{task} left {i}", "sentence2": f"{task} right {i}", "score": gold[i],
                         "seen_in_train": i % 5 == 0})
        if dup:  # published test sets repeat a pair now and then
            rows.append({**rows[-1], "line": n + 1 + offset})
    table = pd.DataFrame(rows)
    noise = np.random.default_rng(seed).normal(0, 1.5 if seed else 0.5, len(table))
    table["cosine"] = table.score / 5 + noise * 0.1
    dup_rows = table.duplicated(["task", "sentence1", "sentence2", "score"], keep=False)
    table.loc[dup_rows, "cosine"] = table[dup_rows].groupby("task").cosine.transform("first")  # one model, one cosine
    table["prediction"] = table.cosine * 5
    return table


def test_rows_inserted_at_the_top_of_a_test_file_still_pair_each_pair_with_its_twin():
    challenger, champion = _predictions(seed=0), _predictions(seed=1)
    reference = paired_on_predictions(challenger, champion, n_resamples=200).as_dict()
    # today's files have 100 new rows at the top: every line number moved, the pairs did not
    moved = _predictions(seed=1, offset=100)
    assert paired_on_predictions(challenger, moved, n_resamples=200).as_dict() == reference
    # and a reordered table (rows shuffled) is the same comparison
    shuffled = champion.sample(frac=1.0, random_state=3).reset_index(drop=True)
    assert paired_on_predictions(challenger, shuffled, n_resamples=200).as_dict() == reference
    assert reference["diff"] > 0  # the less noisy model gains: the pairing is not a null comparison


def test_matching_by_line_would_have_compared_other_pairs():
    """The hazard this guards against: with line keys, the shifted table pairs pair i with pair i-100 or nothing."""
    challenger, moved = _predictions(seed=0), _predictions(seed=1, offset=100)
    by_line = challenger.merge(moved[["task", "file", "line", "cosine"]], on=["task", "file", "line"],
                               suffixes=("", "_b"))
    assert len(by_line) == 0


def test_a_table_missing_todays_pairs_is_refused_with_the_count_per_task():
    challenger, champion = _predictions(seed=0), _predictions(seed=1)
    older = champion[~((champion.task == "stsb") & champion.sentence1.str.endswith((" 3", " 4")))]
    with pytest.raises(CoverageError, match=r"2 of \d+ test pairs have no prediction .*'stsb': 2"):
        paired_on_predictions(challenger, older)
    with pytest.raises(CoverageError, match="predates matching pairs by content"):
        paired_on_predictions(challenger, champion.drop(columns=["sentence1", "sentence2"]))


def test_only_the_pairs_a_stored_table_lacks_are_scored_and_the_join_equals_a_full_rescore():
    """The gate's re-score of a champion after a table grew: the pairs its stored predictions lack (a duplicate pair's
    second occurrence included), joined to the stored rows, give the same test as the champion scored on everything."""
    from stsreg.product.sts_eval import uncovered

    challenger, champion = _predictions(seed=0), _predictions(seed=1)
    stored = champion[~((champion.task == "stsb") & champion.sentence1.str.endswith((" 3", " 4")))]
    stored = stored.drop(index=stored.index[-1])  # sickr's repeated pair: its second occurrence is missing
    lacking = uncovered(challenger, stored)
    assert sorted(lacking.sentence1.tolist()) == ["sickr left 59", "stsb left 3", "stsb left 4"]
    assert "occurrence" not in lacking and list(lacking.columns) == list(challenger.columns)
    scored = lacking.drop(columns="cosine").merge(champion.drop_duplicates(["task", "sentence1"])[
        ["task", "sentence1", "cosine"]], on=["task", "sentence1"])  # what the champion's model gives those pairs
    joined = pd.concat([stored, scored], ignore_index=True)
    full = paired_on_predictions(challenger, champion, n_resamples=200).as_dict()
    assert paired_on_predictions(challenger, joined, n_resamples=200).as_dict() == full
    assert uncovered(challenger, champion).empty

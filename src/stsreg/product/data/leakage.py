"""Train/test leakage: which evaluation test pairs also occur in a training table.

STS-B was assembled from SemEval STS 2012-2016, so STS-B *train* contains many STS12-16 *test* pairs.
Evaluation must be able to score each task on the pairs no training table contains ("unseen"), so
every STS test row gets ``seen_in_train``; the counts go to the data metrics.

Match modes: ``exact`` — (sentence1, sentence2) after stripping outer whitespace (the sentences in the
prepared tables are already stripped); ``normalized`` — casefolded, inner whitespace collapsed, and
the pair taken in either order.
"""

from __future__ import annotations

import pandas as pd

from stsreg.product.data.catalogue import EVAL_TASKS

MATCH_MODES = ("exact", "normalized")


def _norm(s: pd.Series) -> pd.Series:
    return s.str.casefold().str.split().str.join(" ")


def pair_keys(a: pd.Series, b: pd.Series, mode: str) -> pd.Series:
    """One hashable key per pair (a string), indexed like ``a``."""
    if mode == "exact":
        return a.str.strip() + "\t" + b.str.strip()
    if mode == "normalized":
        na, nb = _norm(a), _norm(b)
        lo = na.where(na <= nb, nb)
        hi = nb.where(na <= nb, na)
        return lo + "\t" + hi
    raise ValueError(f"unknown leakage match mode {mode!r}; use one of {MATCH_MODES}")


def train_tables(sts: pd.DataFrame, trained: tuple[str, ...] | None = None) -> list[str]:
    """The STS tables with a train split that stage 2 trains on (``trained``: ``stage2.train_tables``; None: every
    table with a train split), in table order. A test pair is "seen" when one of them holds it: a declared table that
    only selects or gates does not make public test pairs seen (the model card's definition of unseen)."""
    tables = dict.fromkeys(sts.loc[sts.split == "train", "dataset"])
    return [t for t in tables if trained is None or t in trained]


def test_tables(sts: pd.DataFrame) -> list[str]:
    """Every table with a test split: the 7 public tasks (in reporting order), then declared tables."""
    tested = set(sts.loc[sts.split == "test", "dataset"])
    return [t for t in EVAL_TASKS if t in tested] + [t for t in dict.fromkeys(sts.loc[sts.split == "test", "dataset"])
                                                     if t not in EVAL_TASKS]


def training_keys(sts: pd.DataFrame, nli_train: pd.DataFrame, mode: str,
                  trained: tuple[str, ...] | None = None) -> dict[str, set[str]]:
    """Key sets of the training tables: the train split of each STS table stage 2 trains on (:func:`train_tables`)
    and the NLI training table."""
    out = {}
    for name in train_tables(sts, trained):
        t = sts[(sts.dataset == name) & (sts.split == "train")]
        out[f"{name}_train"] = set(pair_keys(t.sentence1, t.sentence2, mode))
    out["nli_train"] = set(pair_keys(nli_train.premise, nli_train.hypothesis, mode))
    return out


def find_leaks(sts: pd.DataFrame, nli_train: pd.DataFrame, mode: str,
               trained: tuple[str, ...] | None = None) -> pd.DataFrame:
    """Boolean frame (rows of ``sts``, one column per training table) marking test rows seen in it.

    Only rows with ``split == 'test'`` (of any table) can be True.
    """
    keys = pair_keys(sts.sentence1, sts.sentence2, mode)
    is_test = sts.split == "test"
    return pd.DataFrame({name: is_test & keys.isin(ks) for name, ks in training_keys(sts, nli_train, mode,
                                                                                     trained).items()},
                        index=sts.index)


def leakage_metrics(sts: pd.DataFrame, nli_train: pd.DataFrame, mode: str,
                    trained: tuple[str, ...] | None = None) -> dict:
    """Per evaluation task: test pairs, seen/unseen pairs under both match modes, and per training
    table the pairs seen in it under ``mode`` (the configured one)."""
    metrics = {}
    by_mode = {m: find_leaks(sts, nli_train, m, trained) for m in MATCH_MODES}
    for task in test_tables(sts):
        rows = (sts.dataset == task) & (sts.split == "test")
        entry = {"test_pairs": int(rows.sum())}
        for mode, leaks in by_mode.items():
            entry[f"seen_{mode}"] = int(leaks[rows].any(axis=1).sum())
            entry[f"unseen_{mode}"] = entry["test_pairs"] - entry[f"seen_{mode}"]
        for table in by_mode[mode].columns:
            entry[f"seen_in_{table}"] = int(by_mode[mode].loc[rows, table].sum())
        metrics[task] = entry
    return metrics


def remove_from_training(table: pd.DataFrame, a: str, b: str, eval_keys: set[str], mode: str) -> tuple[pd.DataFrame,
                                                                                                       pd.DataFrame]:
    """Split a training table into (kept, removed): removed rows are pairs that occur in a test set."""
    hit = pair_keys(table[a], table[b], mode).isin(eval_keys)
    return table[~hit], table[hit]


def eval_pair_keys(sts: pd.DataFrame, mode: str) -> set[str]:
    t = sts[sts.split == "test"]
    return set(pair_keys(t.sentence1, t.sentence2, mode))

"""A warm retrain's rows: every row new to the model it continues, and a fraction of that model's own rows replayed.

Rows are told apart by content (:data:`stsreg.product.data.schemas.ROW_KEY`, as the retrain counts added rows),
against ``train_rows.npy`` (:data:`stsreg.product.model_files.TRAIN_ROWS`), which every stage-2 folder keeps: the
hashes of the train rows its training was drawn from (:func:`stsreg.product.training.stage2_training.fine_tune`
writes it; :mod:`stsreg.product.runners.warm_start` reads the champion's).
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd

from stsreg.product.data.catalogue import sample_pairs
from stsreg.product.data.schemas import ROW_KEY

log = logging.getLogger(__name__)

def row_hashes(train: pd.DataFrame) -> np.ndarray:
    """(n_unique,) uint64, sorted: one hash per distinct row of ``train`` by :data:`ROW_KEY` (pandas' fixed-key
    hash: the same on every machine)."""
    return np.unique(_per_row(train))


def _per_row(train: pd.DataFrame) -> np.ndarray:
    return pd.util.hash_pandas_object(train[ROW_KEY], index=False).to_numpy()


def replayed(train: pd.DataFrame, seen: np.ndarray, warm, task: str, cap: int, seed: int
             ) -> tuple[pd.DataFrame, dict]:
    """A warm retrain's rows, sized from what arrived, and their counts. ``train``: today's train rows; ``seen``: the
    champion's ``train_rows.npy``; ``warm``: :class:`stsreg.infra.settings_training.Stage2WarmStartParams`; ``task``:
    your task's table (``stage2.dev_table``); ``cap``: ``stage2.max_train_pairs`` (0 = all) on the new rows.

    Every row not among ``seen`` trains (the new rows, ``n``), beside at most ``round(warm.task_replay * n)`` old rows
    of ``task`` and ``round(warm.other_replay * n)`` old rows of the other tables, drawn with ``seed``: a round's steps
    follow the arrival, not the table (1k new rows on a 100k-row table train 1k + 2k + 4k rows with the defaults, not
    100k). New rows first, then the replayed. Counts: ``{"new", "replayed", "old", "task": {"table", "replayed",
    "old", "per_new"}, "other": {"replayed", "old", "per_new"}}``. With no row new (a retrain for a changed param),
    there is nothing to size from: every row trains again, as a cold retrain draws them (``"why"`` says so)."""
    is_old = np.isin(_per_row(train), seen)
    new = sample_pairs(train[~is_old], cap, seed)
    if new.empty:
        rows = {"new": 0, "replayed": int(is_old.sum()), "old": int(is_old.sum()),
                "why": "no row is new to the champion: every row trained again"}
        log.info("warm retrain: %s", rows["why"])
        return sample_pairs(train, cap, seed), rows
    own = (train.dataset == task).to_numpy()
    parts, rows = [new], {"new": len(new)}
    for key, old, per_new in (("task", train[is_old & own], warm.task_replay),
                              ("other", train[is_old & ~own], warm.other_replay)):
        drawn = old.sample(n=min(len(old), round(per_new * len(new))), random_state=seed)
        parts.append(drawn)
        rows[key] = {"replayed": len(drawn), "old": len(old), "per_new": per_new}
    rows["task"]["table"] = task
    rows.update(replayed=rows["task"]["replayed"] + rows["other"]["replayed"], old=int(is_old.sum()))
    log.info("warm retrain on %d new rows, %d of %d old %s rows and %d of %d other old rows replayed", len(new),
             rows["task"]["replayed"], rows["task"]["old"], task, rows["other"]["replayed"], rows["other"]["old"])
    return pd.concat(parts, ignore_index=True), rows

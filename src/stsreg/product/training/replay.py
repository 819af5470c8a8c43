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


def replayed(train: pd.DataFrame, seen: np.ndarray, replay: float, cap: int, seed: int, task: str | None = None
             ) -> tuple[pd.DataFrame, dict]:
    """A warm retrain's rows and their counts ``{"new", "replayed", "old", "replay"}``: every row of ``train`` (today's
    train rows) not among ``seen`` (the champion's ``train_rows.npy``; at most ``cap`` of them, 0 = all) and
    ``round(replay * min(old, cap))`` of the old ones, drawn with ``seed``; new rows first, then the replayed. ``task``
    (a table name, ``stage2.dev_table``): its old rows are all replayed (counted under ``"task"``), and the fraction
    is drawn from the other tables' old rows."""
    is_old = np.isin(_per_row(train), seen)
    new = sample_pairs(train[~is_old], cap, seed)
    own = is_old & (train.dataset == task).to_numpy() if task else np.zeros(len(train), dtype=bool)
    old = sample_pairs(train[is_old & ~own], cap, seed)
    kept = pd.concat([train[own], old.sample(n=round(replay * len(old)), random_state=seed)], ignore_index=True)
    rows = {"new": len(new), "replayed": len(kept), "old": int(is_old.sum()), "replay": replay}
    if task:
        rows["task"] = {"table": task, "replayed": int(own.sum())}
    log.info("warm retrain on %d new rows and %d of %d old ones (replay %g)", rows["new"], rows["replayed"],
             rows["old"], replay)
    return pd.concat([new, kept], ignore_index=True), rows

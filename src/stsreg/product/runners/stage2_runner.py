"""Stage 2's runner: ``models/stage1`` + the STS tables -> ``models/stage2`` (the STS-B dev selection)."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pandas as pd

from stsreg.infra import public_tables
from stsreg.infra import runtime
from stsreg.infra.config import Params
from stsreg.infra.errors import InputError
from stsreg.product.data.catalogue import TRAIN_DATASETS, dev_split, sample_pairs, sts_training_pairs
from stsreg.product.model import SiameseRegressor
from stsreg.product.objective import Objective
from stsreg.product.runners import NOOP
from stsreg.product.training.replay import replayed, row_hashes
from stsreg.product.runners.start import Start
from stsreg.product.training.stage2_training import Stage2Job, fine_tune


def stage2_data(sts_path: Path, tables: tuple[str, ...] = TRAIN_DATASETS, dev_table: str = public_tables.DEV_TABLE
                ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(train, dev): the train rows of ``tables`` (default STS-B + SICK-R) on the 0-5 scale, and ``dev_table``'s dev
    rows (default STS-B dev).

    Test rows are never read (a parquet filter keeps them out of memory): training and every choice made on
    its dev curve (checkpoint selection, the search) cannot see a test label."""

    sts = pd.read_parquet(sts_path, filters=[("split", "in", ["train", "dev"])])
    train, dev = sts_training_pairs(sts, tables), dev_split(sts, dev_table)
    if train.empty:
        raise InputError(f"{sts_path}: no train rows in the tables {list(tables)} (stage2.train_tables): run "
                         "`dvc repro prepare` after declaring a table")
    return train, dev


def warm_eval_every(pairs: int, p) -> int:
    """A warm retrain's dev evaluation interval: ``stage2.warm_start.evals`` evaluations over its steps (``pairs``
    rows at ``stage2.batch_size`` for ``stage2.epochs``, the warm ones in place). A warm run is short (a few hundred
    steps): at the cold run's ``eval_every`` it may be judged once, at its end, after the schedule decayed the lr to
    zero, and then nothing beats the champion it started from."""
    steps = math.ceil(pairs / p.batch_size) * p.epochs
    return max(1, math.ceil(steps / p.warm_start.evals))


def run_stage2(start: Start, sts_path: Path, out_dir: Path, ckpt_dir: Path, log_metric=NOOP, keep: str | None = None,
               on_eval=None) -> dict:
    """``start`` (its model: a saved folder, by default ``models/stage1``, or a model object; its params) + STS tables
    -> ``out_dir`` (the STS-B dev selection ``keep``, default ``stage2.keep``, and ``train_rows.npy``: the train rows
    drawn from), ``stage2.max_train_pairs`` applied. ``on_eval(step, dev_spearman)``: see
    :class:`stsreg.product.training.selection.DevSelector`. With ``start.seen`` (a warm start's champion's train-row
    hashes) every row not among them and a replay of the others sized from them
    (:func:`stsreg.product.training.replay.replayed`) train, and the summary's ``started_from["rows"]`` counts them."""
    params, init, started_from = start.params, start.init, start.origin
    device = runtime.resolve_device()
    runtime.init_distributed(device)
    model = init if isinstance(init, SiameseRegressor) else SiameseRegressor.load(init,
                                                                                  precision=params.model.precision)
    model.token_cache = runtime.cache_dir("tokens")
    runtime.set_seed(params.seed)
    p = params.stage2
    train, dev = stage2_data(sts_path, p.train_tables, p.dev_table)
    drawn_from = row_hashes(train)
    if start.seen is None:
        train = sample_pairs(train, p.max_train_pairs, params.seed)
    else:
        train, rows = replayed(train, start.seen, p.warm_start, p.dev_table, p.max_train_pairs, params.seed)
        started_from = {**(started_from or {}), "rows": rows}
    if (started_from or {}).get("from") == "champion":
        p = dataclasses.replace(p, eval_every=warm_eval_every(len(train), p))
    job = Stage2Job(train, dev, out_dir, ckpt_dir, keep, device, started_from, drawn_from)
    return fine_tune(model, job, Objective.from_params(p), p, params.seed, log_metric, on_eval)

"""Before a stage command starts a flow (and, with it, a Prefect server): are the files it reads there?

A stage run out of order (``stsreg evaluate`` in a fresh clone) stops in about a second with one message naming each
missing input and the DVC stage that makes it, instead of a Prefect start-up followed by a traceback.

    missing_inputs(needs)  # the (path, stage that writes it) of a command's inputs that are not there
"""

from __future__ import annotations

import argparse
from pathlib import Path

from stsreg.infra.errors import InputError
from stsreg.infra.scales import INTERNAL

PREPARED = "data/prepared"


def missing_inputs(needs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The ``(path, stage that writes it)`` of ``needs`` (a command's inputs, :data:`stsreg.cli.COMMANDS`) that do
    not exist."""
    return [(path, stage) for path, stage in needs if not Path(path).exists()]


#: Columns of a prepared STS table (``stsreg prepare`` writes them) that training and evaluation read.
STS_COLUMNS = ("dataset", "split", "sentence1", "sentence2", "score")


def sts_table_problem(path: str) -> str:
    """Why ``path`` is not a prepared STS table (``""`` when it is): not Parquet, or columns missing (found ones
    listed)."""
    import pyarrow.parquet as pq

    try:
        found = pq.read_schema(path).names
    except Exception as exc:  # noqa: BLE001 (pyarrow raises several kinds for a file that is not Parquet)
        return f"{path} is not a Parquet table ({type(exc).__name__}); pass a table `stsreg prepare` wrote"
    absent = [c for c in STS_COLUMNS if c not in found]
    if absent:
        return (f"{path} has no column(s) {absent} (found: {found}); a prepared STS table has {list(STS_COLUMNS)}: "
                "`stsreg prepare` writes data/prepared/sts.parquet from the raw files")
    return ""


def sts_content_problems(path: str, train_tables: tuple[str, ...], dev_table: str) -> list[str]:
    """Why stage 2 cannot train on the prepared table ``path`` (empty when it can): scores that are not numbers, not
    finite, or outside the 0-5 scale on the rows it reads; no train split in ``train_tables``; no dev split of
    ``dev_table``. The checks ``prepare`` makes, for a table given with ``--sts``."""
    import numpy as np
    import pandas as pd

    df = pd.read_parquet(path, columns=list(STS_COLUMNS))
    used = (df.dataset.isin(train_tables) & (df.split == "train")) | ((df.dataset == dev_table) & (df.split == "dev"))
    problems = []
    if not pd.api.types.is_numeric_dtype(df.score):
        example = next((v for v in df.score[used] if pd.isna(pd.to_numeric(pd.Series([v]), errors="coerce"))[0]), None)
        problems.append(f"its score column holds {df.score.dtype} values (e.g. {example!r}), not numbers")
    else:
        score = df.score[used].astype(float)
        bad = ~np.isfinite(score)
        if bad.any():
            problems.append(f"{int(bad.sum())} score(s) are NaN or infinite")
        outside = np.isfinite(score) & ((score < INTERNAL[0]) | (score > INTERNAL[1]))
        if outside.any():
            problems.append(f"{int(outside.sum())} score(s) lie outside the 0-5 scale every prepared table is on "
                            f"(range {score[outside].min():g}..{score[outside].max():g}): declare the table's scale in "
                            "prepare.sts_tables and let `stsreg prepare` map it")
    if not (df.dataset.isin(train_tables) & (df.split == "train")).any():
        problems.append(f"no train rows of stage2.train_tables {list(train_tables)}")
    if not ((df.dataset == dev_table) & (df.split == "dev")).any():
        problems.append(f"no dev rows of stage2.dev_table {dev_table!r}")
    return problems


def check_inputs(args: argparse.Namespace, needs: list[tuple[str, str]]) -> None:
    """Raise :class:`InputError` naming every missing input of ``needs`` (``(path, stage that writes it)``) and the
    stage to run first, or a table in the wrong shape."""
    missing = missing_inputs(needs)
    if missing:
        first = missing[0][1]
        lines = [f"{path} is missing (written by the `{stage}` stage)" for path, stage in missing]
        raise InputError("; ".join(lines) + f": run `dvc repro {first}` first, or `make run` for the whole pipeline")
    sts = getattr(args, "sts", None)
    if sts and (args.command == "evaluate" or (args.command == "train" and args.stage == "2")):
        problem = sts_table_problem(sts)
        if problem:
            raise InputError(problem)
        if args.command == "train":
            from stsreg.infra.config import load_params

            s2 = load_params(args.params).stage2
            problems = sts_content_problems(sts, s2.train_tables, s2.dev_table)
            if problems:
                raise InputError(f"{sts}: stage 2 cannot train on it: " + "; ".join(problems))

"""pandera schemas for the prepared tables, and lazy validation that splits a frame into kept rows,
rejected rows (with a reason each) and flagged duplicates.

STS table (``data/prepared/sts.parquet``), one row per scored pair:
    dataset (sts12..sts16, stsb, sickr), subset, split (train/dev/test), sentence1, sentence2 (non-empty,
    stripped), score (float; 0-5, SICK 1-5), file, line (provenance in data/raw), seen_in_train (bool).
NLI table (``data/prepared/nli.parquet``):
    source, split, premise, hypothesis (non-empty, stripped), label (int: contradiction=0, neutral=1,
    entailment=2), file, line.
"""

from __future__ import annotations

import pandas as pd
import pandera.pandas as pa

NLI_LABELS = {"contradiction": 0, "neutral": 1, "entailment": 2}
SPLITS = ("train", "dev", "test")
# an STS row's identity: its content, not its file or line (what the retrain counts as added or removed, and what a
# warm retrain tells its new rows from the champion's by)
ROW_KEY = ["dataset", "sentence1", "sentence2", "score"]

_non_empty = pa.Check(lambda s: s.str.strip().str.len() > 0, error="empty after stripping whitespace")


def _text(name: str) -> pa.Column:
    return pa.Column(str, _non_empty, nullable=False, title=name)


def sts_schema(lo: float, hi: float, unique_pairs: bool = True) -> pa.DataFrameSchema:
    """Schema of raw STS rows for one dataset whose gold scores lie in ``[lo, hi]``."""
    return pa.DataFrameSchema(
        {
            "dataset": pa.Column(str),
            "subset": pa.Column(str),
            "split": pa.Column(str, pa.Check.isin(SPLITS)),
            "sentence1": _text("sentence1"),
            "sentence2": _text("sentence2"),
            "score": pa.Column(float, pa.Check.in_range(lo, hi), nullable=False),
            "file": pa.Column(str),
            "line": pa.Column(int, pa.Check.ge(1)),
        },
        unique=["split", "sentence1", "sentence2"] if unique_pairs else None,
        report_duplicates="exclude_first",
        strict="filter",
    )


def nli_schema(unique_pairs: bool = True) -> pa.DataFrameSchema:
    """Schema of raw NLI rows; ``label`` is still the label *name* here (mapped to int after validation)."""
    return pa.DataFrameSchema(
        {
            "source": pa.Column(str),
            "split": pa.Column(str),
            "premise": _text("premise"),
            "hypothesis": _text("hypothesis"),
            "label": pa.Column(str, pa.Check.isin(list(NLI_LABELS)), nullable=False),
            "file": pa.Column(str),
            "line": pa.Column(int, pa.Check.ge(1)),
        },
        unique=["split", "premise", "hypothesis"] if unique_pairs else None,
        report_duplicates="exclude_first",
        strict="filter",
    )


DUPLICATE_CHECK = "multiple_fields_uniqueness"


def validate(df: pd.DataFrame, schema: pa.DataFrameSchema, raw_score: pd.Series | None = None
             ) -> tuple[pd.Series, pd.Series]:
    """Validate lazily (all failures at once).

    Returns two Series indexed like ``df``: ``reasons`` (str, "" when the row passes every content
    check; else every failure joined by "; ") and ``duplicate`` (bool, a later copy of a pair already
    seen in the same split). The duplicate check is reported separately so that the caller decides
    whether duplicates are rejected or only flagged.
    """
    reasons = pd.Series("", index=df.index, dtype=object)
    duplicate = pd.Series(False, index=df.index)
    try:
        schema.validate(df, lazy=True)
    except pa.errors.SchemaErrors as err:
        fc = err.failure_cases
        fc = fc[fc["index"].notna()]
        for (idx, column, check), _ in fc.groupby(["index", "column", "check"], sort=False, dropna=False):
            idx = int(idx)
            if check == DUPLICATE_CHECK:
                duplicate.loc[idx] = True
                continue
            value = df.at[idx, column] if column in df.columns else None
            value = value.item() if hasattr(value, "item") else value  # numpy scalar -> plain repr
            if column == "score" and raw_score is not None and check == "not_nullable":
                msg = f"score is not a number: {raw_score.loc[idx]!r}"
            elif check == "not_nullable":
                msg = f"{column} is missing"
            else:
                msg = f"{column} fails {check}: {value!r}"
            reasons.loc[idx] = msg if not reasons.loc[idx] else f"{reasons.loc[idx]}; {msg}"
    return reasons, duplicate

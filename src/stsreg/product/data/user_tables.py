"""Your own scored pairs: a declared table (``prepare.sts_tables``) read, checked, split and put on the 0-5 scale.

One path for every format, chosen by the file's extension: ``.csv``, ``.tsv``, ``.jsonl`` (``.json`` lines) and
``.parquet`` (pyarrow, through pandas). What a row becomes:

- kept: ``dataset`` (the table's name), ``split``, ``sentence1``, ``sentence2``, ``score`` (mapped linearly from the
  declared ``scale`` to 0-5, the scale of the losses, the buffer and the cosine map), ``file``, ``line`` (the row's
  line in a CSV/TSV/JSONL file, header counted; its row number, from 1, in Parquet) and ``raw_score`` (as written);
- rejected (named by file, line and reason, kept in ``data/rejected/<name>.parquet`` and counted): an empty
  sentence, a sentence that is not text (an object, a list, a number or a boolean), a score that is not a number or
  lies outside the scale, a split value other than train/dev/test.

Splits come from a split column, or from a stable hash of the pair's content (:func:`hash_split`): appending or
reordering rows never moves a pair from one split to another, so the test set stays the test set as data grows.

A table is refused whole (one line, :class:`~stsreg.infra.errors.InputError`, nothing written) when a named column
is missing (the columns found are listed), when most scores lie outside the declared scale (the observed range is
given), when a split has too few pairs or one score only (Spearman is undefined), or when a pair sits in both the
train and the test split.
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

import numpy as np
import pandas as pd

from stsreg.infra.config import StsTableSource
from stsreg.infra.errors import InputError
from stsreg.infra.hashing import sha256_file
from stsreg.infra.scales import to_internal
from stsreg.product.data.table_files import TableFile, read_frame

log = logging.getLogger(__name__)

#: A dev or test split needs this many pairs for a Spearman worth reporting.
MIN_SPLIT_PAIRS = 10
SPLITS = ("train", "dev", "test")


def pair_hash(sentence1: pd.Series, sentence2: pd.Series) -> np.ndarray:
    """(n,) floats in [0, 1): a stable hash of each (stripped sentence1, stripped sentence2)."""
    keys = sentence1.astype(str).str.strip() + "\t" + sentence2.astype(str).str.strip()
    return np.array([int.from_bytes(hashlib.sha256(k.encode()).digest()[:8], "big") / 2**64 for k in keys])


def hash_split(sentence1: pd.Series, sentence2: pd.Series, dev_fraction: float, test_fraction: float) -> pd.Series:
    """train / dev / test per pair from :func:`pair_hash`: below ``test_fraction`` test, then dev, then train."""
    h = pair_hash(sentence1, sentence2)
    return pd.Series(np.where(h < test_fraction, "test", np.where(h < test_fraction + dev_fraction, "dev", "train")),
                     index=sentence1.index)


#: Common annotation scales: what a file's scores are said to look like, and what `stsreg data check` proposes.
KNOWN_SCALES = ((0.0, 1.0), (0.0, 5.0), (1.0, 5.0), (0.0, 10.0), (0.0, 100.0))


def guess_scale(scores) -> tuple[float, float] | None:
    """The smallest of :data:`KNOWN_SCALES` holding every score (a non-empty array), else None."""
    lo, hi = float(np.min(scores)), float(np.max(scores))
    fits = [s for s in KNOWN_SCALES if s[0] <= lo and hi <= s[1]]
    return min(fits, key=lambda s: s[1] - s[0]) if fits else None


#: The reason a sentence that is a value of another kind is rejected.
NOT_TEXT = "a sentence is not text (an object, a list, a number or a boolean)"


#: The reason a row whose sentence is a null (JSON null, an empty CSV field's NaN, Parquet's null / pd.NA) is rejected.
MISSING = "a sentence is missing (null)"


def _missing(value) -> bool:
    """Whether ``value`` (as a reader gave it) is a null: None, NaN, pd.NA or NaT (never read as "<NA>" or "nan")."""
    return value is None or value is pd.NA or value is pd.NaT or (isinstance(value, (float, np.floating))
                                                                     and np.isnan(value))


def _not_text(value) -> bool:
    """Whether ``value`` (as a reader gave it) is something other than text: missing values are not (they are empty)."""
    if isinstance(value, str) or _missing(value):
        return False
    return isinstance(value, (dict, list, tuple, bool, int, float, np.number, np.bool_, np.ndarray))


def _looks_like(values: pd.Series) -> str:
    guess = guess_scale(values.to_numpy())
    seen = f"the scores run {float(values.min()):g}..{float(values.max()):g}"
    return f"{seen}, which looks like a {guess[0]:g}-{guess[1]:g} scale" if guess else seen


def read_table(t: StsTableSource, project: Path) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """Read declared table ``t`` (its ``file`` relative to ``project``). Returns (kept rows, rejected rows with
    file / line / reason / raw, counts) or raises :class:`InputError` for a table refused whole."""
    path = project / t.file
    if not path.is_file():
        raise InputError(f"{t.file}: no such file (declared in prepare.sts_tables[{t.name}])")
    read = read_frame(path, t.quoting, t.encoding)
    if read.dialect is not None and read.dialect.note:  # quoting: auto chose; say so (declare quoting to decide)
        log.info("%s: %s (declare prepare.sts_tables[%s].quoting to decide)", t.file, read.dialect.note, t.name)
    frame = read.frame
    cols = t.columns
    wanted = {"sentence1": cols.sentence1, "sentence2": cols.sentence2, "score": cols.score}
    if cols.split:
        wanted["split"] = cols.split
    absent = [f"{theirs!r} ({ours})" for ours, theirs in wanted.items() if theirs not in frame.columns]
    if absent:
        raise InputError(f"{t.file}: no column {', '.join(absent)}; the file has {list(frame.columns)}: map yours in "
                         f"prepare.sts_tables[{t.name}].columns")
    df = pd.DataFrame({k: frame[v] for k, v in wanted.items()})
    df["line"] = read.line
    # an object, a list, a number or a boolean where a sentence belongs is not text: rejected, never kept as its repr
    nested = df.sentence1.map(_not_text) | df.sentence2.map(_not_text)
    null = df.sentence1.map(_missing) | df.sentence2.map(_missing)
    for c in ("sentence1", "sentence2"):
        df[c] = df[c].map(lambda x: "" if _missing(x) else str(x)).astype(object).str.strip()
    df["raw_score"] = df["score"].astype(str)
    score = pd.to_numeric(df["score"].astype(str).str.strip(), errors="coerce")
    lo, hi = t.scale
    reasons = pd.Series("", index=df.index, dtype=object)
    reasons[nested] = NOT_TEXT
    reasons[(reasons == "") & null] = MISSING
    empty = (df.sentence1 == "") | (df.sentence2 == "")
    reasons[(reasons == "") & empty] = "empty sentence after stripping whitespace"
    reasons[(reasons == "") & score.isna()] = "score is not a number"
    outside = score.notna() & ((score < lo) | (score > hi))
    reasons[(reasons == "") & outside] = f"score outside the declared scale [{lo:g}, {hi:g}]"
    numeric = score.notna().sum()
    if numeric and outside.sum() > numeric / 2:
        raise InputError(f"{t.file}: {int(outside.sum())} of {int(numeric)} scores lie outside the declared scale "
                         f"[{lo:g}, {hi:g}]; {_looks_like(score.dropna())}: set prepare.sts_tables[{t.name}].scale")
    if cols.split:
        split = df["split"].astype(str).str.strip().str.lower()
        reasons[(reasons == "") & ~split.isin(SPLITS)] = f"split is not one of {list(SPLITS)}"
    else:
        split = hash_split(df.sentence1, df.sentence2, t.dev_fraction, t.test_fraction)
    bad = reasons != ""
    rejects = _rejects(t, df[bad], split[bad], reasons[bad], read)
    kept = pd.DataFrame({"dataset": t.name, "subset": t.name, "split": split[~bad], "sentence1": df.sentence1[~bad],
                         "sentence2": df.sentence2[~bad], "score": to_internal(score[~bad], (lo, hi),
                                                                               t.rescale).astype(float),
                         "file": t.file, "line": df.line[~bad].astype(int)}).reset_index(drop=True)
    _check_splits(t, kept)
    repeated = kept.duplicated(["split", "sentence1", "sentence2"])  # kept, counted, as prepare's flag mode does
    counts = {"read": len(df) + len(read.rejects), "kept": len(kept), "rejected": int(bad.sum()) + len(read.rejects),
              "duplicate_pairs": int(repeated.sum()),
              "unscored_skipped": 0, **{f"rows_{s}": int((kept.split == s).sum()) for s in SPLITS}}
    return kept, rejects.reset_index(drop=True), counts


def _rejects(t: StsTableSource, bad: pd.DataFrame, split: pd.Series, reasons: pd.Series, read: TableFile):
    """The rejected rows (``bad``, with their ``split`` and ``reasons``) and the records the reader could not read,
    in file order: dataset, split, file, line, reason, raw."""
    rejects = pd.DataFrame({"dataset": t.name, "split": split.where(split.isin(SPLITS), "unknown"), "file": t.file,
                            "line": bad.line, "reason": reasons,
                            "raw": bad.sentence1 + "\t" + bad.sentence2 + "\t" + bad.raw_score})
    unread = pd.DataFrame({"dataset": t.name, "split": "unknown", "file": t.file,
                           "line": [n for n, _, _ in read.rejects], "reason": [r for _, r, _ in read.rejects],
                           "raw": [raw for _, _, raw in read.rejects]})
    return pd.concat([unread, rejects]).sort_values("line", kind="stable") if len(unread) else rejects


def _check_splits(t: StsTableSource, kept: pd.DataFrame) -> None:
    """Refuse a table whose splits cannot be used: too few or constant dev/test pairs, or a pair in train and test."""
    for split in ("dev", "test"):
        rows = kept[kept.split == split]
        if len(rows) < MIN_SPLIT_PAIRS:
            raise InputError(
                f"{t.file}: the {split} split has {len(rows)} pairs (at least {MIN_SPLIT_PAIRS} are needed for a "
                f"Spearman): add rows or raise {split}_fraction"
            )
        if rows.score.nunique() < 2:
            raise InputError(f"{t.file}: every {split} pair scores {rows.score.iloc[0]:g}: Spearman is undefined on "
                             "constant scores")
    if len(kept[kept.split == "train"]) == 0:
        raise InputError(f"{t.file}: no pair in the train split")
    key = kept.sentence1 + "\t" + kept.sentence2
    both = set(key[kept.split == "train"]) & set(key[kept.split == "test"])
    if both:
        example = next(iter(sorted(both))).replace("\t", " | ")
        raise InputError(f"{t.file}: {len(both)} pair(s) sit in both the train and the test split (e.g. {example!r}): "
                         "a test pair must never be trained on")


def read_tables(tables, project: Path, rejects: dict, stats: dict) -> list[pd.DataFrame]:
    """The user's tables (``prepare.sts_tables``) through their one reading path; their rejects and counts join the
    public tables' (``rejects`` and ``stats`` are updated), with each table's scale, ``d``, file and sha256."""
    kept = []
    for table in tables:
        k, r, counts = read_table(table, project)
        kept.append(k)
        rejects[table.name].append(r)
        for name, value in counts.items():
            stats[table.name][name] += value
        stats[table.name].update(scale=list(table.scale), d=table.d, file=table.file,
                                 sha256=sha256_file(project / table.file))
    return kept

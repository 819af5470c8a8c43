"""``stsreg data check FILE``: preview a table of scored pairs before declaring it, writing nothing.

It reads the file through the same path ``prepare`` uses (:func:`stsreg.product.data.user_tables.read_table`), so
what it accepts, rejects or refuses is what ``prepare`` will, and prints: rows read, kept per split, the first
rejects with their line and reason, a histogram of the scores on the file's own scale, and the
``prepare.sts_tables`` entry to paste into params.yaml.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from stsreg.infra.config import TABLES_DIR, StsTableColumns, StsTableSource
from stsreg.product.data import user_tables

def guess_gap(scores: np.ndarray, scale: tuple[float, float]) -> float:
    """``d``: 1 when the scores are integer ratings (or averages of them) on a scale wider than 1, else a tenth of
    the scale (say so: the annotation scale's categories are the user's to state)."""
    span = scale[1] - scale[0]
    return 1.0 if span >= 2 else round(span / 10, 6)


def histogram(scores: np.ndarray, scale: tuple[float, float], bins: int = 10, width: int = 40) -> str:
    counts, edges = np.histogram(scores, bins=bins, range=scale)
    top = max(int(counts.max()), 1)
    return "\n".join(f"  {edges[i]:>7.3g} .. {edges[i + 1]:<7.3g} {'#' * round(width * c / top):<{width}} {c}"
                     for i, c in enumerate(counts))


def check(file: str, sentence1: str, sentence2: str, score: str, split: str = "", scale: tuple | None = None,
          d: float | None = None, name: str | None = None, dev_fraction: float = 0.1, test_fraction: float = 0.1) -> str:
    """The preview's text; raises :class:`~stsreg.infra.errors.InputError` where ``prepare`` would refuse the table."""
    path = Path(file)
    frame, _ = user_tables.read_frame(path)
    name = name or re.sub(r"[^a-z0-9_]+", "_", path.stem.lower()).strip("_") or "mine"
    if not name[0].isalpha():
        name = "t_" + name
    columns = StsTableColumns(sentence1=sentence1, sentence2=sentence2, score=score, split=split)
    if score in frame.columns:
        import pandas as pd

        numeric = pd.to_numeric(frame[score].astype(str).str.strip(), errors="coerce").dropna().to_numpy()
        if not scale and numeric.size:  # the smallest common scale holding the scores, else their own range
            scale = user_tables.guess_scale(numeric) or (float(numeric.min()), float(numeric.max()))
        scale = tuple(scale or (0.0, 5.0))
        d = d if d is not None else guess_gap(numeric, scale)
    table = StsTableSource(name=name, file=file, columns=columns, scale=tuple(scale or (0.0, 5.0)),
                           d=d if d is not None else 1.0, dev_fraction=dev_fraction, test_fraction=test_fraction)
    # a missing score column is refused here, by the column check, before any scale is used
    kept, rejects, counts = user_tables.read_table(table, Path("."))
    lo, hi = table.scale
    on_scale = user_tables.from_internal(kept.score, table.scale)  # back on the file's scale, for the histogram
    declared = path.as_posix().startswith(TABLES_DIR + "/")
    where = path.as_posix() if declared else f"{TABLES_DIR}/{path.name}"
    lines = [f"{file}: {counts['read']} rows read, {counts['kept']} kept "
             f"(train {counts['rows_train']}, dev {counts['rows_dev']}, test {counts['rows_test']}), "
             f"{counts['rejected']} rejected" + (f" (split by a stable hash of each pair: dev {dev_fraction:g}, test "
                                                 f"{test_fraction:g})" if not split else f" (split column {split!r})")]
    if len(rejects):
        lines.append("first rejects (line: reason):")
        lines += [f"  {r.line}: {r.reason}" for r in rejects.head(5).itertuples()]
    lines += [f"scores on the scale [{lo:g}, {hi:g}] (d = {table.d:g}; mapped to 0-5 for training):",
              histogram(on_scale.to_numpy(), (lo, hi))]
    if not declared:
        lines.append(f"\ncopy it under {TABLES_DIR}/ first (`cp {file} {where}`; `dvc add {where}` for a large file)")
    cols = {"sentence1": sentence1, "sentence2": sentence2, "score": score, **({"split": split} if split else {})}
    lines += ["\nparams.yaml: add it to prepare.sts_tables, after the public tables:", f"    - name: {name}",
              f"      file: {where}",
              "      columns: {" + ", ".join(f"{k}: {v}" for k, v in cols.items()) + "}",
              f"      scale: [{lo:g}, {hi:g}]", f"      d: {table.d:g}"]
    if not split:
        lines += [f"      dev_fraction: {dev_fraction:g}", f"      test_fraction: {test_fraction:g}"]
    lines += [f"then train on it (stage2.train_tables: [stsb, sickr, {name}]), select on it (stage2.dev_table: {name}) "
              f"and gate on it (promote.metrics: [avg7, {name}]); `dvc repro promote`"]
    return "\n".join(lines)

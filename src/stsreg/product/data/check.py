"""``stsreg data check FILE``: preview a table of scored pairs before declaring it, writing nothing.

It reads the file through the same path ``prepare`` uses (:func:`stsreg.product.data.user_tables.read_table`), so
what it accepts, rejects or refuses is what ``prepare`` will, and prints: rows read, kept per split, the first
rejects with their line and reason, a histogram of the scores on the file's own scale, and the
``prepare.sts_tables`` entry to paste into params.yaml.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from stsreg.infra import knobs
from stsreg.infra.config import TABLES_DIR, StsTableColumns, StsTableSource
from stsreg.infra.errors import InputError
from stsreg.infra.scales import from_internal, valid_scale
from stsreg.product.data import user_tables
from stsreg.product.data.delimited import NOT_UTF8


#: At most this many distinct scores make a category grid (0-20 in steps of 1, 0-5 in quarters); more are averaged
#: or continuous ratings, whose categories the file cannot tell.
MAX_GRID = 21


def guess_gap(scores: np.ndarray, scale: tuple[float, float]) -> tuple[float, str]:
    """(``d``, why): the step of the scores' grid when they take few distinct values (every value ``lo + k*d``);
    for averaged or continuous scores, a fifth of the scale (the 6 points of STS's 0-5), said so."""
    values = np.unique(np.round(np.asarray(scores, dtype=float), 6))
    span = scale[1] - scale[0]
    if 2 <= len(values) <= MAX_GRID:
        step = float(np.min(np.diff(values)))
        on_grid = np.allclose(np.round((values - values[0]) / step), (values - values[0]) / step, atol=1e-6)
        if on_grid:
            return round(step, 6), f"the scores take {len(values)} distinct values, {step:g} apart"
    return round(span / 5, 6), (f"the scores take {len(values)} distinct values (averaged or continuous ratings): "
                                "d proposed as a fifth of the scale, as STS's 0-5; state your annotators' step with "
                                "--d")


def buffer_advice(x0: float, table: StsTableSource) -> str:
    """Whether stage 2's buffer ``x0`` (on the 0-5 scale) is accepted when the table trains (``x0 <= d/2``)."""
    gap = table.internal_gap()
    if x0 <= gap / 2:
        return f"stage2.x0 = {x0:g} is accepted for it (x0 <= d/2 = {gap / 2:g} on the 0-5 scale the losses use)"
    return (f"stage2.x0 = {x0:g} would be REFUSED when it trains (x0 <= d/2 = {gap / 2:g} on the 0-5 scale; d = "
            f"{table.d:g} on [{table.scale[0]:g}, {table.scale[1]:g}]): set stage2.x0 <= {gap / 2:g}, or gate and "
            "select on it without training on it")


def histogram(scores: np.ndarray, scale: tuple[float, float], bins: int = 10, width: int = 40) -> str:
    counts, edges = np.histogram(scores, bins=bins, range=scale)
    top = max(int(counts.max()), 1)
    return "\n".join(f"  {edges[i]:>7.3g} .. {edges[i + 1]:<7.3g} {'#' * round(width * c / top):<{width}} {c}"
                     for i, c in enumerate(counts))


@dataclass(frozen=True)
class TableToCheck:
    """A table as ``stsreg data check`` is told of it: its ``file``; the columns holding ``sentence1``, ``sentence2``,
    ``score`` and (optional) ``split``; its ``scale`` [lo, hi] and label gap ``d`` (None: guessed from the scores);
    the ``name`` it would be declared under (None: from the file's name); the hashed split's ``dev_fraction`` and
    ``test_fraction`` (without a split column); its ``encoding``, as ``prepare.sts_tables[].encoding`` (auto: a BOM,
    else UTF-8)."""

    file: str
    sentence1: str
    sentence2: str
    score: str
    split: str = ""
    scale: tuple | None = None
    d: float | None = None
    name: str | None = None
    dev_fraction: float = 0.1
    test_fraction: float = 0.1
    encoding: str = "auto"


def check(given: TableToCheck, x0: float | None = None, max_rejected_fraction: float | None = None) -> str:
    """The preview's text of the ``given`` table; raises :class:`~stsreg.infra.errors.InputError` where ``prepare``
    would refuse it (its reject cap ``max_rejected_fraction``, ``prepare.max_rejected_fraction``, included). ``x0``:
    stage 2's buffer (params.yaml), judged against the table's ``d``."""
    file, score, split, encoding, scale, d = given.file, given.score, given.split, given.encoding, given.scale, given.d
    path = Path(file)
    read = user_tables.read_frame(path, encoding=encoding)
    frame = read.frame
    name = given.name or re.sub(r"[^a-z0-9_]+", "_", path.stem.lower()).strip("_") or "mine"
    if not name[0].isalpha():
        name = "t_" + name
    columns = knobs.build(StsTableColumns, "stsreg data check", sentence1=given.sentence1, sentence2=given.sentence2,
                          score=score, split=split)
    why_d = "" if d is None else "given"
    if scale and not valid_scale(scale):
        raise InputError(f"--scale must be LO HI with LO < HI, got {list(scale)}")
    if score in frame.columns:
        import pandas as pd

        numeric = pd.to_numeric(frame[score].astype(str).str.strip(), errors="coerce").dropna().to_numpy()
        if not scale and numeric.size:  # the smallest common scale holding the scores, else their own range
            scale = user_tables.guess_scale(numeric) or (float(numeric.min()), float(numeric.max()))
        scale = tuple(scale or (0.0, 5.0))
        if d is None and numeric.size:
            d, why_d = guess_gap(numeric[(numeric >= scale[0]) & (numeric <= scale[1])], scale)
    table = knobs.build(StsTableSource, "stsreg data check", name=name, file=file, columns=columns,
                        scale=tuple(scale or (0.0, 5.0)), d=d if d is not None else 1.0,
                        dev_fraction=given.dev_fraction, test_fraction=given.test_fraction,
                        quoting=read.dialect.quoting if read.dialect else "auto", encoding=encoding)
    # a missing score column is refused here, by the column check, before any scale is used
    kept, rejects, counts = user_tables.read_table(table, Path("."))
    _refuse_over_cap(file, counts, rejects, max_rejected_fraction, encoding)
    how = (f" (split by a stable hash of each pair: dev {given.dev_fraction:g}, test {given.test_fraction:g})"
           if not split else f" (split column {split!r})")
    lines = [f"{file}: {counts['read']} rows read, {counts['kept']} kept "
             f"(train {counts['rows_train']}, dev {counts['rows_dev']}, test {counts['rows_test']}), "
             f"{counts['rejected']} rejected" + how]
    if read.dialect:
        lines.append(f"read as {read.dialect.describe()}" + (f"; {read.dialect.note}" if read.dialect.note else ""))
    if len(rejects):
        lines.append("rejected rows (line: reason):")
        lines += _rejected_lines(rejects)
    on_scale = from_internal(kept.score, table.scale)  # back on the file's scale, for the histogram
    lines += [f"scores on the scale [{table.scale[0]:g}, {table.scale[1]:g}] (d = {table.d:g}"
              f"{': ' + why_d if why_d else ''}; mapped to 0-5 for training):",
              histogram(on_scale.to_numpy(), table.scale)]
    return "\n".join(lines + _entry(table, path, read.dialect, x0))


def _refuse_over_cap(file: str, counts: dict, rejects, cap: float | None, encoding: str) -> None:
    """Where prepare would refuse the table for its rejects: one message, with the encoding to try when most of them
    are undecodable bytes (a cp1252 file read as UTF-8)."""
    if cap is None or not counts["read"] or counts["rejected"] / counts["read"] <= cap:
        return
    undecodable = int((rejects.reason == NOT_UTF8).sum()) if len(rejects) else 0
    hint = (f"; {undecodable} of them are not valid UTF-8: if the file is cp1252 (Excel on Windows) or latin-1, "
            "check it with --encoding cp1252 and declare that encoding" if undecodable and encoding == "auto" else "")
    raise InputError(f"{file}: {counts['rejected']} of {counts['read']} rows rejected "
                     f"({counts['rejected'] / counts['read']:.2%} > prepare.max_rejected_fraction={cap}): prepare "
                     f"would refuse this table{hint}. Rejected rows (line: reason):\n"
                     + "\n".join(_rejected_lines(rejects)))


#: How many rejected rows `data check` names, one line each (the rest are counted).
SHOWN_REJECTS = 20


def _rejected_lines(rejects) -> list[str]:
    """Every rejected row as ``  line: reason``, up to :data:`SHOWN_REJECTS`, then how many more."""
    shown = [f"  {r.line}: {r.reason}" for r in rejects.head(SHOWN_REJECTS).itertuples()]
    more = len(rejects) - SHOWN_REJECTS
    return shown + ([f"  ... and {more} more (data/rejected/ lists every one after `dvc repro prepare`)"] if more > 0
                    else [])


def _entry(table: StsTableSource, path: Path, dialect, x0: float | None) -> list[str]:
    """The ``prepare.sts_tables`` entry to paste, where the file must go, and whether stage 2 may train on it."""
    declared = path.as_posix().startswith(TABLES_DIR + "/")
    where = path.as_posix() if declared else f"{TABLES_DIR}/{path.name}"
    lines = [] if declared else [f"\ncopy it under {TABLES_DIR}/ first (`cp {path} {where}`; `dvc add {where}` for a "
                                 "large file)"]
    c, name = table.columns, table.name
    cols = {"sentence1": c.sentence1, "sentence2": c.sentence2, "score": c.score,
            **({"split": c.split} if c.split else {})}
    lines += ["\nparams.yaml: add it to prepare.sts_tables, after the public tables:", f"    - name: {name}",
              f"      file: {where}", "      columns: {" + ", ".join(f"{k}: {v}" for k, v in cols.items()) + "}",
              f"      scale: [{table.scale[0]:g}, {table.scale[1]:g}]", f"      d: {table.d:g}"]
    if not c.split:
        lines += [f"      dev_fraction: {table.dev_fraction:g}", f"      test_fraction: {table.test_fraction:g}"]
    if dialect and dialect.note:
        lines.append(f"      quoting: {dialect.quoting}")
    if table.encoding != "auto":
        lines.append(f"      encoding: {table.encoding}")
    advice = buffer_advice(x0, table) if x0 is not None else ""
    trains = "REFUSED" not in advice
    return lines + ([advice] if advice else []) + [
        (f"then train on it (stage2.train_tables: [stsb, sickr, {name}]), " if trains else "then ")
        + f"select on it (stage2.dev_table: {name}) and gate on it, with the public benchmarks as a guard "
        f"(promote.metrics: [{name}], promote.guards: {{avg7: 0.3}}); "
        "`dvc repro promote`"]

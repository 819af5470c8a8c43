"""``stsreg data add``: new rows appended to a table of yours, after its existing bytes, never a rewrite.

- CSV / TSV: the new rows are written in the file's own dialect (:class:`~stsreg.product.data.delimited.Dialect`:
  encoding, delimiter, quoting, line ending) after its last byte (a missing final newline is added first); the BOM
  and every earlier byte stay as they were, so every earlier row reads back identical and keeps its split.
- JSONL: one object per new row, appended the same way (in the file's own encoding).
- Parquet has no append: the file is written anew from its own rows (read back identical, same schema: categorical
  columns keep their categories and gain the new values, nullable and string types stay theirs) plus the new.

Rows whose pair (stripped sentence1, sentence2) is already in the table, or repeated in the new file, are
reported; ``duplicates: skip`` (the default) leaves them out, ``refuse`` refuses the whole add. An add holds the
project's data lock (:func:`stsreg.infra.locking.data_write_lock`: it waits for a running stage or ``dvc repro``,
and a ``dvc repro`` started meanwhile waits for it).

The rows are judged before your file is written: the grown table is made on a copy (in a temporary folder), read
back with the reader ``prepare`` uses and every appended row compared with the input (each column's text; numbers as
numbers), and ``check`` (prepare's reading of the grown table, its reject cap included) runs on it: every new row is
judged on its own, so one that prepare would reject refuses the add (each such line named), whatever the table's
reject cap; ``skip_bad`` judges the others again and adds them, listing the rest. Only then are the judged bytes
written to your file, once: appended after its last byte (a Parquet file swapped in whole). Any refusal (other
columns, a character the file's encoding cannot hold, a value the column's type cannot hold, a row that reads back
different, the grown table refused) leaves the file untouched, and the error names the rows and the reason.
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from stsreg.infra import atomic
from stsreg.infra.errors import InputError
from stsreg.infra.locking import data_write_lock
from stsreg.product.data.table_files import TableFile, format_of, read_frame

DUPLICATE_MODES = ("skip", "refuse")


@dataclass(frozen=True)
class AddRequest:
    """One ``stsreg data add``: the rows of ``rows_file`` (any supported format, the table's column names) for the
    declared table named ``table``. ``duplicates``: skip | refuse rows repeating a pair already there or in the file;
    ``max_rejected_fraction``: prepare's reject cap for the grown table (``prepare.max_rejected_fraction``);
    ``skip_bad``: rows prepare would reject are left out (else any refuses the add); ``encoding``: the rows file's
    (None: UTF-8, else the table's declared one); ``wait_s``: how long to wait for a running stage or ``dvc repro``
    (0: not at all)."""

    table: str
    rows_file: Path
    duplicates: str = "skip"
    max_rejected_fraction: float = 1.0
    skip_bad: bool = False
    encoding: str | None = None
    wait_s: float = 3600.0


class _Trial:
    """The grown table tried on a copy, never on the user's file: :meth:`judge` appends rows to a fresh copy of
    ``target`` (in a temporary project, at the table's own path), reads it back and asks prepare's ``check``;
    :meth:`commit` then puts the judged bytes into ``target``, written once (appended after its last byte, or, for a
    format rewritten whole, swapped in atomically)."""

    def __init__(self, fmt, target: Path, current: TableFile, request: AddRequest, table, check):
        self.fmt, self.target, self.current, self.request, self.table, self.check = \
            fmt, target, current, request, table, check
        self._dir = tempfile.TemporaryDirectory(prefix="stsreg-add-")
        self.project = Path(self._dir.name)
        self.copy = self.project / table.file

    def judge(self, rows: pd.DataFrame, lines: pd.Series) -> dict[int, str]:
        """Append ``rows`` (their ``lines`` in the rows file) to a fresh copy; ``{line in the rows file: reason}`` of
        each row prepare would reject there. Raises :class:`InputError` when the copy does not read back as written or
        prepare would refuse the grown table."""
        self.copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(self.target, self.copy)
        self.fmt.append(self.copy, self.current, rows, lines, self.request.rows_file)
        grown = _verify(self.copy, self.table, self.current, rows, lines, self.request.rows_file)
        return self.check(self.table, self.project, grown) if self.check is not None else {}

    def commit(self) -> None:
        """The last judged copy into the user's file; an interrupted append is cut back to the old size."""
        if not self.fmt.in_place:
            with atomic.replace_file(self.target) as tmp:
                shutil.copyfile(self.copy, tmp)
            return
        size = self.target.stat().st_size
        try:
            with open(self.copy, "rb") as src, open(self.target, "ab") as dst:
                src.seek(size)  # the copy is the file's bytes, then the judged rows
                shutil.copyfileobj(src, dst)
                dst.flush()
                os.fsync(dst.fileno())
        except BaseException:
            os.truncate(self.target, size)
            raise

    def __enter__(self) -> _Trial:
        return self

    def __exit__(self, *exc) -> None:
        self._dir.cleanup()


@dataclass(frozen=True)
class Added:
    """What an add did: rows appended, rows left out as duplicates (their lines in the new file), the dialect, and
    with ``skip_bad`` the rows left out because prepare would reject them (``(line in the new file, reason)``)."""

    added: int
    duplicates: tuple[int, ...]
    dialect: str
    skipped: tuple[tuple[int, str], ...] = ()
    encoding: str = "auto"


def _pair_keys(frame: pd.DataFrame, s1: str, s2: str) -> pd.Series:
    return frame[s1].map(lambda x: str(x).strip()) + "\t" + frame[s2].map(lambda x: str(x).strip())


def _read_rows(rows_file: Path, table, encoding: str | None) -> tuple[TableFile, str]:
    """``rows_file`` read in ``encoding``; without one, as UTF-8 (or its byte-order mark) and, where that meets bytes
    UTF-8 cannot hold and the table declares another encoding, in the table's: a cp1252 export added to a cp1252
    table, never a UTF-8 file misread as cp1252. Returns (the file, the encoding used)."""
    if encoding:
        return read_frame(rows_file, encoding=encoding), encoding
    new = read_frame(rows_file)
    if table.encoding != "auto" and any("UTF-8" in reason for _, reason, _ in new.rejects):
        return read_frame(rows_file, encoding=table.encoding), table.encoding
    return new, "auto"


def _new_rows(rows_file: Path, current: TableFile, table, encoding: str | None
              ) -> tuple[pd.DataFrame, pd.Series, str]:
    """The rows to add (columns in the table's order), their lines in ``rows_file`` and the encoding it was read in
    (:func:`_read_rows`)."""
    new, encoding = _read_rows(rows_file, table, encoding)
    if new.rejects:
        line, reason, _ = new.rejects[0]
        advice = (f" (read as {'UTF-8' if encoding == 'auto' else encoding}: if the file is cp1252, from Excel on "
                  "Windows, or latin-1, pass --encoding cp1252 or latin-1)" if "UTF-8" in reason else "")
        raise InputError(f"{rows_file}: {len(new.rejects)} record(s) cannot be read (line {line}: {reason}){advice}; "
                         "nothing was added")
    if sorted(new.frame.columns) != sorted(current.frame.columns):
        raise InputError(f"{rows_file}: columns {list(new.frame.columns)} differ from {table.file}'s "
                         f"{list(current.frame.columns)}; nothing was added")
    return new.frame[list(current.frame.columns)], pd.Series(new.line, index=new.frame.index), encoding


def _same(a, b) -> bool:
    """Whether a value read back equals the one given: missing as missing, numbers as numbers, else the text."""
    def norm(v):
        if v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NA:
            return None
        try:
            return float(str(v).strip())
        except ValueError:
            return str(v)
    return norm(a) == norm(b)


def _verify(target: Path, table, before: TableFile, rows: pd.DataFrame, lines: pd.Series,
            rows_file: Path) -> dict[int, int]:
    """The grown file read back as ``prepare`` reads it: the earlier rows as they were, then exactly the new ones.
    Returns ``{line in the grown table: line in rows_file}`` of the appended rows."""
    after = read_frame(target, table.quoting, table.encoding)
    n = len(before.frame)
    problems = []
    if len(after.frame) != n + len(rows) or len(after.rejects) != len(before.rejects):
        problems.append(f"{len(after.frame) - n} row(s) read back for {len(rows)} written")
    else:
        grown = after.frame.iloc[n:].reset_index(drop=True)
        given = rows.reset_index(drop=True)
        for i in range(len(given)):
            wrong = [c for c in given.columns if not _same(grown.at[i, c], given.at[i, c])]
            if wrong:
                problems.append(f"line {lines.iloc[i]}: {wrong[0]!r} reads back as {grown.at[i, wrong[0]]!r}, not "
                                f"{given.at[i, wrong[0]]!r}")
    if problems:
        raise InputError(f"{rows_file}: the grown {table.file} does not read back as written ("
                         + "; ".join(problems[:5]) + "); nothing was added (the file is as it was)")
    return dict(zip((int(x) for x in after.line[n:]), (int(x) for x in lines)))


def _other_scale(bad: dict[int, str], rows: pd.DataFrame, rows_file: Path, table) -> None:
    """Refuse the whole add (``--skip-bad`` too) when most of its rows score outside the table's scale: the file is on
    another scale, so its in-range scores are misread as well; the error says what it looks like."""
    from stsreg.product.data.user_tables import guess_scale

    outside = sum(why.startswith("score outside") for why in bad.values())
    if outside * 2 <= len(rows):
        return
    scores = pd.to_numeric(rows[table.columns.score].astype(str).str.strip(), errors="coerce").dropna()
    guess = guess_scale(scores.to_numpy()) if len(scores) else None
    looks = (f", which looks like a {guess[0]:g}-{guess[1]:g} scale: a table of that scale would declare scale: "
             f"[{guess[0]:g}, {guess[1]:g}]" if guess else "")
    raise InputError(f"{rows_file}: {outside} of its {len(rows)} rows score outside {table.name}'s scale "
                     f"[{table.scale[0]:g}, {table.scale[1]:g}]; its scores run {scores.min():g}..{scores.max():g}"
                     f"{looks}. Rescale them to [{table.scale[0]:g}, {table.scale[1]:g}] first; nothing was added")


def _refuse_bad(bad: dict[int, str], rows_file: Path, table) -> None:
    shown = "; ".join(f"line {line}: {why}" for line, why in list(bad.items())[:20])
    more = f"; and {len(bad) - 20} more" if len(bad) > 20 else ""
    raise InputError(f"{rows_file}: {len(bad)} of the rows to add would be rejected by prepare ({shown}{more}); "
                     f"nothing was added to {table.file} (--skip-bad adds the others and lists these)")


def prepare_check(max_rejected_fraction: float = 1.0):
    """The ``check`` of :func:`append_rows`: the grown table read as ``prepare`` reads it. Each new row prepare would
    reject is returned (``{line in the rows file: reason}``: judged on its own, no cap applies to it); the table as a
    whole is refused, as prepare would refuse it, when its rejects exceed ``max_rejected_fraction``
    (``prepare.max_rejected_fraction``)."""
    from stsreg.product.data.user_tables import read_table

    def check(table, project: Path, new_lines: dict[int, int]) -> dict[int, str]:
        _, rejects, counts = read_table(table, project)
        mine = rejects[rejects.line.isin(list(new_lines))]
        if len(mine):
            return {new_lines[int(r.line)]: r.reason for r in mine.itertuples()}
        if counts["read"] and counts["rejected"] / counts["read"] > max_rejected_fraction:
            first = rejects.iloc[0]
            raise InputError(f"{table.file} would reject {counts['rejected']} of {counts['read']} rows "
                             f"({counts['rejected'] / counts['read']:.2%} > prepare.max_rejected_fraction="
                             f"{max_rejected_fraction}) and prepare would refuse it (line {first.line}: "
                             f"{first.reason}); nothing was added")
        return {}
    return check


def add_rows(project: Path, tables, request: AddRequest):
    """Append ``request``'s rows to the declared table it names (of ``tables``, ``prepare.sts_tables``; the public
    tables are read from the mirror, not grown), judged as ``prepare`` will read the grown table, its reject cap
    included (:func:`append_rows` with :func:`prepare_check`). Returns (the table, :class:`Added`)."""
    declared = {t.name: t for t in tables if not t.reader}
    if request.table not in declared:
        raise InputError(f"--table {request.table!r} is not a table of yours in prepare.sts_tables (yours: "
                         f"{sorted(declared)})")
    table = declared[request.table]
    return table, append_rows(project, table, request, check=prepare_check(request.max_rejected_fraction))


def append_rows(project: Path, table, request: AddRequest, check=None) -> Added:
    """Append ``request``'s rows to the declared ``table``'s file (the table ``request.table`` names).
    ``check(table, project, lines)`` (prepare's reading of the grown table; ``lines``: ``{line in the table: line in
    the rows file}`` of the new rows) runs after the read-back and returns ``{line in the rows file: reason}`` of each
    new row prepare would reject: each row is judged on its own, whatever the table's reject cap, so any such row
    refuses the add, naming every line, unless ``request.skip_bad`` (then only the others are added, and the result
    lists them). Everything is judged on a copy (:class:`_Trial`); the file is written once, after. The rows file is
    read in ``request.encoding`` (:func:`_read_rows`; the result says which). Waits up to ``request.wait_s`` seconds
    for a running stage or ``dvc repro`` (:func:`~stsreg.infra.locking.data_write_lock`), then ``TimeoutError``.
    Raises :class:`InputError` with nothing written."""
    rows_file, duplicates = request.rows_file, request.duplicates
    if duplicates not in DUPLICATE_MODES:
        raise InputError(f"duplicates must be one of {DUPLICATE_MODES}, got {duplicates!r}")
    target = project / table.file
    fmt = format_of(target)
    with data_write_lock(project, request.wait_s):
        current = read_frame(target, table.quoting, table.encoding)
        rows, lines, encoding = _new_rows(rows_file, current, table, request.encoding)
        s1, s2 = table.columns.sentence1, table.columns.sentence2
        if s1 in rows.columns and s2 in rows.columns:
            keys = _pair_keys(rows, s1, s2)
            dup = keys.isin(set(_pair_keys(current.frame, s1, s2))) | keys.duplicated()
        else:
            dup = pd.Series(False, index=rows.index)
        if dup.any() and duplicates == "refuse":
            raise InputError(f"{rows_file}: {int(dup.sum())} row(s) repeat a pair already in {table.file} or in the "
                             f"file (lines {lines[dup].tolist()[:10]}); nothing was added (--duplicates skip adds the "
                             "rest)")
        rows, lines, dup_lines = rows[~dup], lines[~dup], tuple(int(x) for x in lines[dup])
        described = current.dialect.describe() if current.dialect else fmt.name
        if rows.empty:
            return Added(0, dup_lines, described, encoding=encoding)
        with _Trial(fmt, target, current, request, table, check) as trial:
            bad = trial.judge(rows, lines)
            _other_scale(bad, rows, rows_file, table)
            if bad and not request.skip_bad:
                _refuse_bad(bad, rows_file, table)
            if bad:  # the good rows alone, judged again
                good = ~lines.isin(list(bad))
                rows, lines = rows[good], lines[good]
                if rows.empty:
                    return Added(0, dup_lines, described, tuple(bad.items()), encoding)
                if trial.judge(rows, lines):
                    raise InputError(f"{rows_file}: rows judged good were rejected once the others were left out; "
                                     "nothing was added")
            trial.commit()
        return Added(len(rows), dup_lines, described, tuple(bad.items()), encoding)

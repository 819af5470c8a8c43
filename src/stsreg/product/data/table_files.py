"""A table file of yours (CSV, TSV, JSONL, Parquet by extension) as text columns, each row with the place it came
from, and the records that could not be read (kept with their line and reason, never dropped).

- CSV / TSV: :mod:`stsreg.product.data.delimited` (RFC 4180 or unquoted, BOM, CRLF/LF); a row's ``line`` is the
  file's physical line where the record starts (header counted).
- JSONL (``.jsonl``, ``.json``): one object per line; a line that is not a JSON object is rejected with its line;
  blank lines hold no record; a row's ``line`` is its physical line.
- Parquet: a row's ``line`` is its row number, from 1.

Values are kept as written (strings for text formats): a score is checked by the table's reader, never coerced here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from stsreg.infra.errors import InputError
from stsreg.product.data import delimited, format_writers



@dataclass
class TableFile:
    """``frame``: the rows (n, columns); ``line``: (n,) ints, where each row is in the file; ``rejects``: records that
    could not be read, ``(line, reason, raw)``; ``dialect``: how a CSV/TSV is written (None for other formats)."""

    frame: pd.DataFrame
    line: np.ndarray
    rejects: list[tuple[int, str, str]] = field(default_factory=list)
    dialect: delimited.Dialect | None = None


def read_delimited(delimiter: str):
    """The reader of a delimited format (:func:`stsreg.product.data.delimited.read`: RFC 4180 or unquoted, BOM,
    CRLF/LF, ``quoting`` and ``encoding`` as declared or auto)."""
    def read(path: Path, quoting: str, encoding: str) -> TableFile:
        parsed = delimited.read(path, delimiter, quoting, encoding)
        frame = pd.DataFrame([f for _, f in parsed.records], columns=parsed.header, dtype=object)
        return TableFile(frame, np.array([n for n, _ in parsed.records], dtype=int), parsed.rejects, parsed.dialect)
    return read


def read_parquet(path: Path, quoting: str, encoding: str) -> TableFile:
    try:
        frame = pd.read_parquet(path).astype(object)
    except (ValueError, OSError) as exc:
        raise InputError(f"{path}: not a readable parquet table: {str(exc).splitlines()[0]}") from None
    return TableFile(frame.reset_index(drop=True), np.arange(1, len(frame) + 1))


def read_jsonl(path: Path, quoting: str, encoding: str) -> TableFile:
    text, _, _ = delimited.decode(path.read_bytes(), path, encoding)
    rows, lines, rejects = [], [], []
    for n, raw in enumerate(delimited.physical_lines(text), start=1):
        raw = raw.rstrip("\r\n")
        if not raw.strip():
            continue
        if delimited.undecodable(raw):
            rejects.append((n, delimited.NOT_UTF8, delimited.printable(raw)[:2000]))
            continue
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as exc:
            rejects.append((n, f"not a JSON object: {exc}", raw[:2000]))
            continue
        if not isinstance(obj, dict):
            rejects.append((n, f"not a JSON object: a {type(obj).__name__}", raw[:2000]))
            continue
        rows.append(obj)
        lines.append(n)
    return TableFile(pd.DataFrame(rows, dtype=object), np.array(lines, dtype=int), rejects)


@dataclass(frozen=True)
class FileFormat:
    """A table file format, declared once: its ``name``, its ``extensions`` (lower case, with the dot), how it is read
    (``read(path, quoting, encoding) -> TableFile``) and how it takes new rows (``append``, :mod:`.format_writers`);
    ``in_place``: an append only adds bytes at the end (an add writes your file the judged copy's new bytes) rather
    than rewriting the file (the judged copy swapped in whole)."""

    name: str
    extensions: tuple[str, ...]
    read: Callable[[Path, str, str], TableFile]
    append: Callable[..., None]
    in_place: bool = True


#: The formats a table of yours may take (``prepare``, ``data check``, ``data add``, ``stsreg encode``).
FILE_FORMATS: tuple[FileFormat, ...] = (
    FileFormat("csv", (".csv",), read_delimited(","), format_writers.append_delimited),
    FileFormat("tsv", (".tsv",), read_delimited("\t"), format_writers.append_delimited),
    FileFormat("jsonl", (".jsonl", ".json"), read_jsonl, format_writers.append_jsonl),
    FileFormat("parquet", (".parquet",), read_parquet, format_writers.append_parquet, in_place=False),
)


def formats() -> dict[str, FileFormat]:
    """Extension -> format, from :data:`FILE_FORMATS`."""
    return {ext: f for f in FILE_FORMATS for ext in f.extensions}


def format_of(path: Path) -> FileFormat:
    fmt = formats().get(Path(path).suffix.lower())
    if fmt is None:
        raise InputError(f"{path}: unknown format {Path(path).suffix!r}; use one of {sorted(formats())}")
    return fmt


def read_frame(path: Path, quoting: str = "auto", encoding: str = "auto") -> TableFile:
    """Read ``path`` by its extension's format (``quoting``: CSV and TSV; ``encoding``: the text formats, see
    :func:`stsreg.product.data.delimited.read`). Raises :class:`InputError` for a missing or unreadable file."""
    fmt = format_of(path)
    if not Path(path).is_file():
        raise InputError(f"{path}: no such file")
    return fmt.read(Path(path), quoting, encoding)

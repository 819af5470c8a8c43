"""The input of ``stsreg encode``: a text file (one sentence per line) or a table of yours and its text column, with
the records that cannot be read kept aside (line, reason, raw text), never failing the run."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from stsreg.infra.errors import InputError
from stsreg.product.data import delimited

TEXT = ".txt"
#: Column names tried, in order, when a table's text column is not given.
TEXT_COLUMNS = ("text", "sentence", "sentence1")


def read_text_lines(path: Path) -> tuple[pd.DataFrame, list[tuple[int, str, str]]]:
    """A text file's lines (column ``text``, and ``line``: the physical line, from 1; empty lines kept as empty
    strings) and the lines that cannot be read, ``(line, reason, raw)``: bytes that are not UTF-8 reject their line,
    not the file (a BOM decides UTF-8 / UTF-16)."""
    text, _, _ = delimited.decode(path.read_bytes(), path)
    kept, lines, rejects = [], [], []
    for n, raw in enumerate(delimited.physical_lines(text), start=1):
        raw = raw.removesuffix("\n").removesuffix("\r")
        if delimited.undecodable(raw):
            rejects.append((n, delimited.NOT_UTF8, delimited.printable(raw)[:2000]))
        else:
            kept.append(raw)
            lines.append(n)
    return pd.DataFrame({"text": kept, "line": lines}), rejects


def read_corpus(path: Path, column: str | None = None) -> tuple[pd.DataFrame, str, list[tuple[int, str, str]]]:
    """The input as a table, the name of its text column, and the records that cannot be read ``(line, reason, raw)``
    (kept aside and counted, as prepare's rejects). A text file: one row per readable line (columns ``text`` and
    ``line``)."""
    from stsreg.product.data.user_tables import read_frame

    if not path.is_file():
        raise InputError(f"{path}: no such file")
    if path.suffix.lower() == TEXT:
        frame, rejects = read_text_lines(path)
        return frame, "text", rejects
    read = read_frame(path)
    frame = read.frame
    if column is None:
        column = next((c for c in TEXT_COLUMNS if c in frame.columns), None)
        if column is None:
            raise InputError(f"{path}: name the text column with --column (columns: {list(frame.columns)})")
    if column not in frame.columns:
        raise InputError(f"{path}: no column {column!r} (columns: {list(frame.columns)})")
    bad = [i for i, x in enumerate(frame[column]) if not isinstance(x, str)]
    if bad:
        raise InputError(f"{path}: column {column!r} must hold text; rows {bad[:10]} (from 0) do not")
    return frame, column, read.rejects

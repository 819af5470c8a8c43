"""Delimited text tables (CSV, TSV) read as the tools that wrote them wrote them, and their dialect, so that rows
appended later are written the same way (:mod:`stsreg.product.data.append`).

What a file may be (each form is tested with files written by Python's ``csv`` module, pandas ``to_csv`` with both
separators, and a raw TSV with stray quotes):

- **quoting** ``rfc4180``: RFC 4180 as spreadsheets and ``csv`` write it (a field holding the delimiter, a quote
  or a newline is quoted; quotes inside are doubled); ``none``: every physical line one record, split on the
  delimiter, quotes literal (the public STS files, which hold unbalanced ``"``); ``auto`` (the default) reads both
  ways and keeps the one that rejects fewer records, and says which and why (:attr:`Dialect.note`): never a silent
  guess. Declare ``quoting`` on the table to skip the detection.
- **encoding**: a BOM decides (UTF-8, UTF-16 LE/BE: Excel's "Unicode text"); without one, UTF-8, and a line
  holding bytes that are not UTF-8 is rejected (file, line, reason), not the file.
- **line endings**: CRLF or LF (mixed too); kept in :attr:`Dialect.newline` for appends.

Every record carries the file's *physical* line where it starts (a quoted newline makes a record span lines; the
records after it keep their real line numbers). A quoted record that does not parse rejects its first physical line
and reading resumes on the next one, so one unbalanced quote never swallows the records after it.
"""

from __future__ import annotations

import codecs
import csv
from dataclasses import dataclass, field
from pathlib import Path

from stsreg.infra.errors import InputError

#: How a table's fields may be quoted (``quoting`` of a declared table).
QUOTINGS = ("auto", "rfc4180", "none")
#: Byte-order marks -> the codec that reads the text after them.
BOMS = ((codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"))
NOT_UTF8 = "not valid UTF-8 (undecodable bytes)"


@dataclass(frozen=True)
class Dialect:
    """How a delimited file is written: what an append must repeat byte for byte."""

    delimiter: str
    quoting: str  # rfc4180 | none (what was read; "auto" resolved)
    encoding: str  # the codec of the text after the BOM
    bom: bytes  # b"" when none
    newline: str  # "\r\n" | "\n": the first line's ending (an append checks the file's last byte itself)
    note: str = ""  # how `auto` chose, when the file's quotes made it a choice

    def describe(self) -> str:
        enc = f"{self.encoding}{' with BOM' if self.bom else ''}"
        sep = {"\t": "tab", ",": "comma"}.get(self.delimiter, repr(self.delimiter))
        nl = "CRLF" if self.newline == "\r\n" else "LF"
        quoting = "RFC 4180 quoting" if self.quoting == "rfc4180" else "no quoting (quotes are text)"
        return f"{enc}, {sep}-separated, {quoting}, {nl} line endings"


@dataclass
class Delimited:
    """A parsed file: its header, records ``(first physical line, fields)``, rejects ``(line, reason, raw)``."""

    header: list[str]
    records: list[tuple[int, list[str]]] = field(default_factory=list)
    rejects: list[tuple[int, str, str]] = field(default_factory=list)
    dialect: Dialect | None = None


def decode(data: bytes, path: Path, encoding: str = "auto") -> tuple[str, str, bytes]:
    """(text, codec, BOM) of a file's bytes; undecodable UTF-8 survives as lone surrogates (``surrogateescape``),
    rejected per line by the parser."""
    if encoding == "auto":
        for bom, codec in BOMS:
            if data.startswith(bom):
                try:
                    return data[len(bom):].decode(codec, errors="surrogateescape" if codec == "utf-8"
                                                  else "strict"), codec, bom
                except UnicodeDecodeError as exc:
                    raise InputError(
                        f"{path}: starts with a {codec} byte-order mark but is not {codec}: {exc}"
                    ) from None
        return data.decode("utf-8", errors="surrogateescape"), "utf-8", b""
    try:
        return data.decode(encoding), encoding, b""
    except (UnicodeDecodeError, LookupError) as exc:
        raise InputError(f"{path}: not readable as the declared encoding {encoding!r}: {exc}") from None


def undecodable(*texts: str) -> bool:
    """True when a text holds bytes that were not valid UTF-8 (decoded by :func:`decode` as lone surrogates)."""
    return any(not t.isascii() and any("\udc80" <= ch <= "\udcff" for ch in t) for t in texts)


def printable(raw: str) -> str:
    return raw.encode("utf-8", errors="surrogateescape").decode("utf-8", errors="replace")


def physical_lines(text: str) -> list[str]:
    """The text's lines with their terminators (``\\n`` or ``\\r\\n``), as the ``csv`` module wants them fed. Only
    ``\\n`` ends a line: a bare CR, U+2028 or a form feed inside a sentence is text (``str.splitlines`` would cut)."""
    lines = text.split("\n")
    out = [ln + "\n" for ln in lines[:-1]]
    return out + ([lines[-1]] if lines[-1] else [])


def _strip(line: str) -> str:
    return line[:-2] if line.endswith("\r\n") else line[:-1] if line.endswith("\n") else line


def _records_rfc(lines: list[str], delimiter: str, n_fields: int, start: int):
    """Yield ``(line, fields | None, raw, reason)`` per RFC 4180 record of ``lines[start:]`` (``line`` 1-based).

    Fast path: one ``csv`` reader over every line. Only where a record fails (a parse error, or a record spanning
    lines with the wrong field count: an unbalanced quote) is its first physical line rejected and reading resumed on
    the next line."""
    i = start
    while i < len(lines):
        src = iter(lines[i:])
        reader = csv.reader(src, delimiter=delimiter, strict=True)
        consumed = 0
        try:
            for fields in reader:
                first, consumed = i + consumed, reader.line_num
                taken = consumed - (first - i)
                if taken > 1 and len(fields) != n_fields:
                    yield (first + 1, None, _strip(lines[first]),
                           f"expected {n_fields} fields, got {len(fields)} in a record spanning {taken} lines "
                           f"(unbalanced quote?); this line rejected, reading resumed at line {first + 2}")
                    i = first + 1
                    break
                yield first + 1, fields, "".join(lines[first:first + taken]).rstrip("\r\n"), ""
            else:
                return
        except csv.Error as exc:
            first = i + consumed
            yield (first + 1, None, _strip(lines[first]),
                   f"quoting error: {exc}; this line rejected, reading resumed at line {first + 2}")
            i = first + 1


def _parse(lines: list[str], delimiter: str, quoting: str, n_fields: int) -> tuple[list, list]:
    records, rejects = [], []
    if quoting == "none":
        rows = ((n + 1, _strip(ln).split(delimiter), _strip(ln), "") for n, ln in enumerate(lines[1:], start=1))
    else:
        rows = _records_rfc(lines, delimiter, n_fields, 1)
    for line, fields, raw, reason in rows:
        if fields is None:
            rejects.append((line, reason, printable(raw)[:2000]))
        elif fields == [] or fields == [""]:
            continue  # a blank line holds no record (a file's trailing empty lines)
        elif undecodable(*fields):
            rejects.append((line, NOT_UTF8, printable(raw)[:2000]))
        elif len(fields) != n_fields:
            rejects.append((line, f"expected {n_fields} fields, got {len(fields)}", printable(raw)[:2000]))
        else:
            records.append((line, fields))
    return records, rejects


def _header(first: str, delimiter: str, quoting: str, path: Path) -> list[str]:
    if quoting == "none":
        return _strip(first).split(delimiter)
    try:
        return next(csv.reader([first], delimiter=delimiter, strict=True))
    except (csv.Error, StopIteration) as exc:
        raise InputError(f"{path}: line 1: unreadable header: {exc}") from None


def read(path: Path, delimiter: str, quoting: str = "auto", encoding: str = "auto") -> Delimited:
    """Parse a delimited file with a header line. Raises :class:`InputError` for an empty or unreadable file."""
    if quoting not in QUOTINGS:
        raise InputError(f"{path}: quoting must be one of {QUOTINGS}, got {quoting!r}")
    text, codec, bom = decode(path.read_bytes(), path, encoding)
    lines = physical_lines(text)
    if not lines or not lines[0].strip():
        raise InputError(f"{path}: empty file or empty first line, expected a header line")
    newline = "\r\n" if lines[0].endswith("\r\n") else "\n"
    note = ""
    if quoting == "auto":
        quoting, note = _detect(lines, delimiter, path)
    header = _header(lines[0], delimiter, quoting, path)
    if undecodable(*header):
        raise InputError(f"{path}: line 1: the header is {NOT_UTF8}")
    records, rejects = _parse(lines, delimiter, quoting, len(header))
    return Delimited(header, records, rejects, Dialect(delimiter, quoting, codec, bom, newline, note))


def _detect(lines: list[str], delimiter: str, path: Path) -> tuple[str, str]:
    """``(quoting, note)`` for ``quoting: auto``: the reading that rejects fewer records (RFC 4180 on a tie), and
    why."""
    if not any('"' in ln for ln in lines):
        return "rfc4180", ""  # no quote anywhere: both readings are the same
    n = len(_header(lines[0], delimiter, "rfc4180", path))
    quoted, raw = _parse(lines, delimiter, "rfc4180", n), _parse(lines, delimiter, "none", n)
    bad_q, bad_r = len(quoted[1]), len(raw[1])
    if bad_q <= bad_r:
        differ = sum(a != b for a, b in zip(quoted[0], raw[0])) if len(quoted[0]) == len(raw[0]) else None
        why = (f"read with RFC 4180 quoting ({bad_q} rejected; read unquoted, {bad_r} would be"
               + (f", and {differ} records would keep their quote characters" if differ else "") + ")")
        return "rfc4180", why
    return "none", (f"read unquoted, quotes as text ({bad_r} rejected; with RFC 4180 quoting {bad_q} would be, "
                    f"the first at line {quoted[1][0][0]}: {quoted[1][0][1]})")

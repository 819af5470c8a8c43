"""What every raw-file reader (:mod:`stsreg.product.data.readers`) returns, and the line-level primitives they share:
decoding a file as its tools wrote it (UTF-8 with or without BOM, CRLF or LF, undecodable bytes kept to reject their
line, not the file), the path a reject names, and the reject record itself."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Parsed:
    """What a reader returns: ``rows`` (one dict per record, fields as strings, with ``file`` and 1-based ``line``),
    ``rejects`` (structurally broken records), ``skipped`` (absent by design) and per-file counts."""

    rows: list[dict] = field(default_factory=list)
    rejects: list[dict] = field(default_factory=list)
    skipped: int = 0
    #: records per file (relative path): every one is a row, a reject or skipped
    read: Counter = field(default_factory=Counter)
    skipped_by_file: Counter = field(default_factory=Counter)

    def extend(self, other: "Parsed") -> "Parsed":
        self.rows += other.rows
        self.rejects += other.rejects
        self.skipped += other.skipped
        self.read.update(other.read)
        self.skipped_by_file.update(other.skipped_by_file)
        return self

    def skip(self, file: str) -> None:
        self.skipped += 1
        self.skipped_by_file[file] += 1

    def per_file(self) -> dict[str, dict[str, int]]:
        """``{file: {read, kept, rejected, skipped}}`` before content validation (kept = parsed rows)."""
        kept, rejected = Counter(r["file"] for r in self.rows), Counter(r["file"] for r in self.rejects)
        return {f: {"read": n, "kept": kept[f], "rejected": rejected[f], "skipped": self.skipped_by_file[f]}
                for f, n in self.read.items()}

    def check_accounting(self) -> None:
        """``read = kept + rejected + skipped`` for every file; a reader that loses a record is a bug."""
        for f, c in self.per_file().items():
            if c["read"] != c["kept"] + c["rejected"] + c["skipped"]:
                raise AssertionError(f"{f}: {c['read']} records read but {c['kept']} kept + {c['rejected']} "
                                     f"rejected + {c['skipped']} skipped")


def rel(path: Path, root: Path) -> str:
    """``path`` relative to the raw root (what a reject names), or as given when it lies elsewhere."""
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return path.as_posix()


def text(path: Path) -> str:
    """The file decoded as UTF-8 (BOM dropped); undecodable bytes survive as lone surrogates (see
    :func:`undecodable`)."""
    return path.read_bytes().decode("utf-8", errors="surrogateescape").removeprefix("\ufeff")


def lines(path: Path) -> list[str]:
    """Physical lines without their terminator; CRLF and LF may be mixed in one file."""
    lines = text(path).split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # final newline; a file without one (SICK.txt) keeps its last line
    return [ln[:-1] if ln.endswith("\r") else ln for ln in lines]


def undecodable(*texts: str) -> bool:
    """True when a text holds bytes that were not valid UTF-8 (decoded by :func:`text` as lone surrogates)."""
    return any(not t.isascii() and any("\udc80" <= ch <= "\udcff" for ch in t) for t in texts)


def printable(raw: str) -> str:
    """``raw`` with its undecodable bytes shown as U+FFFD (a reject keeps the line as a user can read it)."""
    return raw.encode("utf-8", errors="surrogateescape").decode("utf-8", errors="replace")


NOT_UTF8 = "not valid UTF-8 (undecodable bytes)"


def reject(file: str, line: int, reason: str, raw: str) -> dict:
    """One rejected record: its file, 1-based line, the reason and the raw text."""
    return {"file": file, "line": line, "reason": reason, "raw": printable(raw)}

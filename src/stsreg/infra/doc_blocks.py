"""Generated blocks of a Markdown file (the README): tables copied verbatim from the report files that made them.

A block is the text between two marker lines::

    <!-- generated: reports/compare/results.md -->
    ...the file's text, exactly...
    <!-- end generated -->

``sync`` rewrites every block from its file (``stsreg report --readme README.md``); with ``check=True`` it writes
nothing and returns the blocks that differ, so a test or CI can say that the README's tables and the committed
reports disagree. Paths in the markers are relative to the Markdown file's folder.
"""

from __future__ import annotations

import re
from pathlib import Path

from stsreg.infra import atomic
from stsreg.infra.errors import InputError

BEGIN = re.compile(r"^<!-- generated: (?P<path>\S+) -->$")
END = "<!-- end generated -->"


def blocks(text: str, name: str = "README.md") -> list[tuple[str, int, int]]:
    """``(path, first, last)`` for each block: the line indices (0-based) of its body, ``last`` exclusive.

    Raises InputError, naming the file and line, for a block without its end marker or a nested begin marker."""
    found, opened = [], None  # opened: (path, line index) of the block being read
    for n, line in enumerate(text.splitlines()):
        m = BEGIN.match(line)
        if m and opened:
            raise InputError(f"{name}:{n + 1}: a generated block begins inside the one opened at line {opened[1] + 1}")
        if m:
            opened = (m["path"], n)
        elif line == END and opened:
            found.append((opened[0], opened[1] + 1, n))
            opened = None
    if opened:
        raise InputError(f"{name}:{opened[1] + 1}: generated block for {opened[0]} has no line {END!r}")
    return found


def sync(markdown: Path, check: bool = False) -> list[str]:
    """Rewrite each generated block of ``markdown`` from its file; returns the paths whose block differed.

    ``check``: compare only, write nothing. A block whose file does not exist raises InputError."""
    text = markdown.read_text(encoding="utf-8")
    lines, stale = text.splitlines(), []
    for path, first, last in reversed(blocks(text, markdown.name)):  # from the end, so earlier indices stay valid
        source = markdown.parent / path
        if not source.is_file():
            raise InputError(f"{markdown.name}: generated block names {path}, which does not exist")
        body = source.read_text(encoding="utf-8").strip("\n").splitlines()
        if lines[first:last] != body:
            stale.append(path)
            lines[first:last] = body
    if stale and not check:
        atomic.write_text(markdown, "\n".join(lines) + ("\n" if text.endswith("\n") else ""))
    return sorted(stale)

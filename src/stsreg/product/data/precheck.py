"""Check every raw file a dataset needs *before* parsing: present, not empty, the registered bytes, not too short.

The sources registry (``data/sources.json``) is required. Each file it lists must have its registered size
(``bytes``) and sha256: a file edited, cut or replaced after ``stsreg fetch`` is refused, naming the expected and
actual hash and how to restore it, unless ``prepare.allow_local_edits`` is true, in which case the changed files are
returned (the stage lists them in its summary and the training runs tag them). A file may also have ``min_rows``: the
fewest non-blank lines it may hold (a header line counts; each line of a multi-line CSV record counts). Files without
an entry (``fetch.extra_nli``) are checked against the sha256 given in params when there is one, and must exist and
hold at least one non-blank line.

    changed = check_inputs(parts, Path("data/raw"), registry)   # raises InputError listing every problem

The registry is read by :func:`stsreg.product.data.sources.load_registry`, the one reader fetch uses too.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable

from stsreg.infra.config import ExtraNLISource
from stsreg.product.data.catalogue import Part
from stsreg.product.data.sources import Source, extra_sources, load_registry
from stsreg.infra.errors import InputError
from stsreg.infra.hashing import sha256_file


def count_rows(path: Path) -> int:
    """Non-blank physical lines of a file (bytes-level, so undecodable bytes do not matter here)."""
    with open(path, "rb") as fh:
        return sum(1 for line in fh if line.strip())


def not_text(path: Path, probe: int = 8192) -> str:
    """Why ``path`` is not a text file (NUL bytes, or mostly bytes that are not UTF-8 in its first ``probe`` bytes),
    or empty when it reads as text. A few undecodable bytes are a text file's problem, rejected row by row."""
    with open(path, "rb") as fh:
        head = fh.read(probe)
    if b"\0" in head:
        return f"not a text file: {head.count(0)} NUL byte(s) in its first {len(head)} bytes (binary content)"
    bad = len(head) - len(head.decode("utf-8", errors="ignore").encode("utf-8"))
    if bad > len(head) // 4:
        return f"not a text file: {bad} of its first {len(head)} bytes are not UTF-8 (binary content)"
    return ""


def _changed(path: Path, source: Source) -> str:
    """How ``path`` differs from its registry entry (size first: no hashing needed), or empty if it does not."""
    size = path.stat().st_size
    if source.bytes is not None and size != source.bytes:
        return f"{size} bytes, registered {source.bytes}; sha256 {sha256_file(path)}, registered {source.sha256}"
    if source.sha256 and (got := sha256_file(path)) != source.sha256:
        return f"sha256 {got}, registered {source.sha256}"
    return ""


def check_inputs(parts: list[Part], raw_root: Path, registry: str | os.PathLike, allow_local_edits: bool = False,
                 extra: Iterable[ExtraNLISource] = ()) -> list[str]:
    """Raise one :class:`InputError` naming each missing, empty, binary, changed or too short file (and its
    dataset/split), checked against ``registry`` and the ``extra`` NLI files of params (``fetch.extra_nli``).

    Returns the changed files (``file: how``) when ``allow_local_edits`` accepts them; otherwise an empty list."""
    sources = {s.file: s for s in load_registry(registry) + extra_sources(extra)}
    problems, changed = [], []
    for part in parts:
        for rel in part.files:
            path = raw_root / rel
            where = f"{path} [{part.dataset}/{part.split}]"
            source = sources.get(rel, Source(dataset=part.dataset, file=rel, sha256=""))
            if not path.is_file():
                problems.append(f"  - {where}: missing")
                continue
            if path.stat().st_size == 0:
                problems.append(f"  - {where}: empty (0 bytes)")
                continue
            if why := not_text(path):
                problems.append(f"  - {where}: {why}")
                continue
            if how := _changed(path, source):
                if allow_local_edits:
                    changed.append(f"{rel}: {how}")
                else:
                    problems.append(f"  - {where}: changed since fetch: {how}")
            need = source.min_rows or 1
            if need > 1 and (rows := count_rows(path)) < need:
                problems.append(f"  - {where}: {rows} non-blank lines, fewer than min_rows {need} declared in "
                                f"{registry} (truncated?)")
    if problems:
        raise InputError(f"{len(problems)} raw file problem(s), nothing was prepared:\n" + "\n".join(problems)
                         + "\nHow to fix: rerun `stsreg fetch` (it restores and verifies every registered file), or "
                           "`dvc checkout data/raw`, or supply the files named above; to prepare deliberately edited "
                           "files set prepare.allow_local_edits: true (they are then listed in the data summary).")
    return changed

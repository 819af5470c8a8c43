"""Check every raw file a dataset needs *before* parsing: present, not empty, and not shorter than declared.

The sources registry (``data/sources.json``) may give a file a ``min_rows``: the fewest non-blank lines the
file may hold (a header line counts; each line of a multi-line CSV record counts). It catches a file
truncated by a failed copy long before a split quietly shrinks. Files without an entry (``fetch.extra_nli``)
must exist and hold at least one non-blank line.

    check_inputs(parts, Path("data/raw"), registry)   # raises InputError listing every problem, or returns
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from stsreg.data.catalogue import Part
from stsreg.errors import InputError


def min_rows(registry: str | os.PathLike | None) -> dict[str, int]:
    """``{file: min_rows}`` from a sources registry; an absent registry declares nothing."""
    if registry is None or not Path(registry).exists():
        return {}
    try:
        entries = json.loads(Path(registry).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"{registry}: unreadable sources registry: {exc}") from None
    return {e["file"]: int(e["min_rows"]) for e in entries if e.get("min_rows") is not None}


def count_rows(path: Path) -> int:
    """Non-blank physical lines of a file (bytes-level, so undecodable bytes do not matter here)."""
    with open(path, "rb") as fh:
        return sum(1 for line in fh if line.strip())


def check_inputs(parts: list[Part], raw_root: Path, registry: str | os.PathLike | None) -> None:
    """Raise one :class:`InputError` naming each missing, empty or too short file (and its dataset/split)."""
    minimum = min_rows(registry)
    problems = []
    for part in parts:
        for rel in part.files:
            path = raw_root / rel
            where = f"{path} [{part.dataset}/{part.split}]"
            if not path.is_file():
                problems.append(f"  - {where}: missing")
            elif path.stat().st_size == 0:
                problems.append(f"  - {where}: empty (0 bytes)")
            else:
                rows, need = count_rows(path), minimum.get(rel, 1)
                if rows < need:
                    problems.append(f"  - {where}: {rows} non-blank lines, fewer than min_rows {need} declared in "
                                    f"{registry} (truncated?)")
    if problems:
        raise InputError(f"{len(problems)} raw file problem(s), nothing was prepared:\n" + "\n".join(problems)
                         + "\nHow to fix: rerun `stsreg fetch` (it restores and verifies every registered file) "
                           "or supply the files named above.")

"""Content fingerprints: the one home of the project's hashes (settings, files, sentence lists).

    >>> fingerprint({"a": 1}, 2) == fingerprint({"a": 1}, 2)
    True
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Iterable


def fingerprint(*parts, length: int = 16) -> str:
    """sha256 (``length`` hex) of JSON-serialisable ``parts`` (keys sorted; other objects by ``str``): equal
    settings give equal fingerprints however they were written."""
    return hashlib.sha256(json.dumps(parts if len(parts) != 1 else parts[0], sort_keys=True, default=str).encode()
                          ).hexdigest()[:length]


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    """Full sha256 (64 hex) of a file, read in chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(chunk), b""):
            h.update(block)
    return h.hexdigest()


def sha256_lines(texts: Iterable[str]) -> str:
    """Full sha256 of a list of strings, each terminated by NUL (so ``["ab"]`` and ``["a", "b"]`` differ)."""
    h = hashlib.sha256()
    for s in texts:
        h.update(s.encode())
        h.update(b"\0")
    return h.hexdigest()

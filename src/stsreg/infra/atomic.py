"""Atomic outputs: a reader never sees a half-written file or folder, and a crash leaves the old one intact.

Every file goes to a temporary name in the same folder and is renamed over the target (``os.replace`` is
atomic on POSIX). A folder is built under a temporary name and swapped in with two renames. A stage with
several outputs writes its folders first and its metrics / marker file last, so a complete marker always
describes complete outputs.

    with atomic.replace_file("metrics/x.json") as tmp:   # write to tmp; renamed over the target on success
        tmp.write_text("...")
    atomic.write_json("metrics/x.json", {"a": 1})
    with atomic.staged_dir("models/stage1") as tmp:      # fill tmp; swapped in on success, removed on error
        model.save(tmp)
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator


@contextmanager
def replace_file(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success it replaces ``path``, on error it is removed."""
    dest = Path(path)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=dest.suffix + ".tmp")
    os.close(fd)
    os.chmod(tmp, 0o644)  # mkstemp makes 0600; outputs are ordinary readable files
    try:
        yield Path(tmp)
        os.replace(tmp, dest)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_text(path: str | os.PathLike, text: str) -> None:
    with replace_file(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_json(path: str | os.PathLike, obj: Any, indent: int | None = 2, **kwargs) -> None:
    write_text(path, json.dumps(obj, indent=indent, **kwargs) + "\n")


def read_json(path: str | os.PathLike) -> dict:
    """The JSON object a :func:`write_json` left at ``path``; {} when there is none (never half a file)."""
    path = Path(path)
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def to_parquet(frame, path: str | os.PathLike) -> None:
    with replace_file(path) as tmp:
        frame.to_parquet(tmp, index=False)


def to_csv(frame, path: str | os.PathLike) -> None:
    with replace_file(path) as tmp:
        frame.to_csv(tmp, index=False)


def savefig(fig, path: str | os.PathLike, **kwargs) -> None:
    with replace_file(path) as tmp:
        fig.savefig(tmp, format=Path(path).suffix.lstrip(".") or "png", **kwargs)


@contextmanager
def staged_dir(path: str | os.PathLike) -> Iterator[Path]:
    """Yield an empty temporary folder beside ``path``; on success it takes the place of ``path``."""
    dest = Path(path)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".tmp"))
    os.chmod(tmp, 0o755)  # mkdtemp makes 0700
    try:
        yield tmp
        swap_in(tmp, dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def swap_in(new: Path, dest: Path) -> None:
    """Put folder ``new`` at ``dest``: the old one is renamed aside first and deleted after (two renames)."""
    old = None
    if dest.exists():
        old = Path(tempfile.mkdtemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".old"))
        os.replace(dest, old / "x")
    os.replace(new, dest)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)

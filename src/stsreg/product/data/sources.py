"""The ``fetch`` stage: copy every registered raw file from a mirror (or its upstream URL) into
``data/raw/`` and verify its sha256.

The registry (``data/sources.json``) lists one entry per file: ``dataset``, ``file`` (path relative to
the mirror and to ``data/raw``), ``sha256``, ``bytes``, ``url`` (upstream, pinned to a commit) and,
for files that live inside a zip upstream, ``archive_member``.

    stsreg fetch --mirror ../shared/data        # or STSREG_DATA_MIRROR=... stsreg fetch

Missing or corrupted files stop the stage with one :class:`FetchError` listing every problem file,
what was expected, and how to supply it; nothing is written half-way (files land via a temp name).
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import shutil
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from tqdm.auto import tqdm

from stsreg.infra import atomic
from stsreg.infra.config import MIRROR_ENV, ExtraNLISource, Params, resolve_mirror
from stsreg.infra.errors import InputError
from stsreg.infra.hashing import sha256_file

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Source:
    """One raw file: where it goes, what its bytes hash to, and where it comes from."""

    dataset: str
    file: str
    sha256: str
    url: str = ""
    bytes: int | None = None
    archive_member: str = ""
    license: str = ""
    min_rows: int | None = None  # fewest non-blank lines the file may hold (checked by stsreg.product.data.precheck)


class FetchError(InputError):
    """Raised once, after every file was tried, listing each file that could not be supplied."""


def load_registry(path: str | os.PathLike) -> list[Source]:
    """Read the committed sources registry (a JSON list of :class:`Source` fields); a missing or unreadable registry
    is an :class:`InputError`."""
    if not Path(path).is_file():
        raise InputError(f"{path}: the sources registry is missing; fetch and prepare check every raw file against it "
                         "(restore it with `git checkout data/sources.json`, or pass --registry PATH)")
    try:
        with open(path, encoding="utf-8") as fh:
            sources = [Source(**e) for e in json.load(fh)]
    except (OSError, ValueError, TypeError) as exc:
        raise InputError(f"{path}: unreadable sources registry: {exc}") from None
    files = [s.file for s in sources]
    if len(files) != len(set(files)):
        raise InputError(f"{path}: duplicate `file` entries in the sources registry")
    return sources


def extra_sources(extra: Iterable[ExtraNLISource]) -> list[Source]:
    """Registry entries for the user's own NLI jsonl files (``fetch.extra_nli`` in params)."""
    return [Source(dataset=f"{e.name}-{e.split}", file=e.file, sha256=e.sha256, url=e.url) for e in extra]


def _download(source: Source, timeout: float = 60.0) -> bytes:
    with urllib.request.urlopen(source.url, timeout=timeout) as resp:  # noqa: S310 (URL from the registry)
        payload = resp.read()
    if source.archive_member:
        with zipfile.ZipFile(io.BytesIO(payload)) as zf:
            payload = zf.read(source.archive_member)
    return payload


def _write_atomic(dest: Path, data: bytes | None = None, copy_from: Path | None = None) -> None:
    with atomic.replace_file(dest) as tmp:
        if copy_from is not None:
            shutil.copyfile(copy_from, tmp)
        else:
            tmp.write_bytes(data or b"")


def fetch_one(source: Source, mirror: Path, out_dir: Path, allow_download: bool) -> str | None:
    """Place one file in ``out_dir``; returns None on success or a one-line problem description."""
    dest = out_dir / source.file
    if dest.exists() and (not source.sha256 or sha256_file(dest) == source.sha256):
        return None  # already fetched and intact
    candidate = mirror / source.file
    problems = []
    if candidate.is_file():
        got = sha256_file(candidate)
        if not source.sha256 or got == source.sha256:
            _write_atomic(dest, copy_from=candidate)
            return None
        problems.append(f"mirror copy {candidate} has sha256 {got}, expected {source.sha256} (corrupted or a different "
                        "version)")
    else:
        problems.append(f"not in mirror {mirror}")
    if allow_download and source.url:
        try:
            payload = _download(source)
        except Exception as exc:  # network errors take many forms; report them all the same way
            problems.append(f"download from {source.url} failed: {exc.__class__.__name__}: {exc}")
        else:
            got = hashlib.sha256(payload).hexdigest()
            if not source.sha256 or got == source.sha256:
                _write_atomic(dest, data=payload)
                return None
            problems.append(f"download from {source.url} has sha256 {got}, expected {source.sha256}")
    elif not source.url:
        problems.append("no upstream URL registered")
    else:
        problems.append("downloads disabled (fetch.allow_download: false)")
    return "; ".join(problems)


def fetch_all(sources: list[Source], mirror: Path, out_dir: Path, allow_download: bool = True) -> dict:
    """Fetch every source; raise :class:`FetchError` listing all failures. Returns a summary dict."""
    failures: list[tuple[Source, str]] = []
    for source in tqdm(sources, desc="fetch", unit="file", disable=None):
        problem = fetch_one(source, mirror, out_dir, allow_download)
        if problem:
            failures.append((source, problem))
    registered = {s.file for s in sources}
    if failures:
        lines = [f"{len(failures)} of {len(sources)} raw file(s) could not be supplied:"]
        for s, problem in failures:
            lines.append(f"  - {s.file} [{s.dataset}] expected sha256 {s.sha256 or '(not checked)'}: {problem}")
        lines.append(
            "How to fix: put the exact published files in a mirror folder with the same relative paths and run "
            f"`stsreg fetch --mirror DIR` (or set {MIRROR_ENV}=DIR, or `fetch.mirror` in params.yaml); "
            "or allow network access to the upstream URLs listed in data/sources.json."
        )
        raise FetchError("\n".join(lines))
    return {"files": len(sources), "bytes": sum((out_dir / f).stat().st_size for f in registered)}


def fetch_stage(params: Params, params_dir: Path, registry: str | os.PathLike, out_dir: Path,
                mirror: str | None = None, no_download: bool = False) -> dict:
    """The whole ``fetch`` stage as the CLI and the Prefect flow run it; adds ``mirror`` to the summary."""
    root = resolve_mirror(params.fetch, mirror, base=params_dir)
    sources = load_registry(registry) + extra_sources(params.fetch.extra_nli)
    summary = fetch_all(sources, root, out_dir, allow_download=params.fetch.allow_download and not no_download)
    return {**summary, "mirror": str(root)}

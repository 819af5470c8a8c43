"""A running ``stsreg serve`` says where it is, so the retrain loop can time the moment it answers a new champion.

While it runs, a server writes ``<project>/.stsreg/serving/<port>.json`` (its URL, the model URI it serves, how often
it follows the alias, its process id) and removes the file when it stops. After a promotion the retrain flow reads
the files of live servers that follow ``@champion`` (:func:`followers`) and polls each one's ``GET /metadata`` until
it answers with the new version (:func:`wait_for_version`): the last phase of the loop's clock.
"""

from __future__ import annotations

import json
import os
import signal
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

from stsreg.infra import atomic
from stsreg.infra.local_servers import STATE_DIR, alive

#: Where live servers announce themselves (relative to the project).
FOLDER = Path(STATE_DIR) / "serving"


def _local_url(host: str, port: int) -> str:
    """The URL a process on this machine reaches the server at (a server bound to every interface: loopback)."""
    return f"http://{'127.0.0.1' if host in ('0.0.0.0', '::', '') else host}:{port}"


@contextmanager
def announced(project: Path, host: str, port: int, model_uri: str, follow_s: float):
    """Write this server's file for the duration of the block (the file is the server's, removed when it stops).

    uvicorn, once it has drained on SIGTERM, raises the signal again to the handler it found: with the default one
    the process would die there and leave the file, so a SIGTERM ends the block with ``SystemExit(143)`` instead."""
    path = project / FOLDER / f"{port}.json"
    atomic.write_json(path, {"url": _local_url(host, port), "model_uri": model_uri, "follow_s": follow_s,
                             "pid": os.getpid(), "started": time.time()})

    def stop(signum, frame):
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield path
    finally:
        path.unlink(missing_ok=True)
        signal.signal(signal.SIGTERM, previous)


def followers(project: Path, alias: str = "champion") -> list[dict]:
    """The live servers of ``project`` that follow ``alias`` (their model URI ends in ``@alias`` and ``follow_s`` > 0);
    a file left by a server that died is skipped."""
    found = []
    for path in sorted((project / FOLDER).glob("*.json")):
        try:
            info = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue  # being written or removed right now
        if alive(int(info.get("pid", -1))) and str(info.get("model_uri", "")).endswith(f"@{alias}") \
                and float(info.get("follow_s") or 0) > 0:
            found.append(info)
    return found


def served_version(url: str, timeout: float = 2.0) -> str | None:
    """The version ``url`` serves now (its ``/metadata``), None while it loads or does not answer."""
    try:
        with urllib.request.urlopen(f"{url}/metadata", timeout=timeout) as response:
            version = json.loads(response.read()).get("version")
    except (OSError, ValueError):
        return None
    return None if version is None else str(version)


def wait_for_version(project: Path, version: int, timeout_s: float, poll_s: float = 0.5) -> dict:
    """Poll every server of :func:`followers` until each answers with ``version`` or ``timeout_s`` passes. Returns
    ``{"servers": [{"url", "answered" (epoch seconds) | "serves" (what it still serves)}], "why": a sentence when no
    server answered it}``."""
    servers = followers(project)
    if not servers:
        return {"servers": [], "why": "no server follows @champion in this project (`make serve` does)"}
    out = {s["url"]: {"url": s["url"]} for s in servers}
    deadline = time.monotonic() + timeout_s
    while True:
        waiting = [url for url, r in out.items() if "answered" not in r]
        for url in waiting:
            served = served_version(url)
            out[url]["serves"] = served
            if served == str(version):
                out[url]["answered"] = time.time()
        if all("answered" in r for r in out.values()) or time.monotonic() > deadline:
            break
        time.sleep(poll_s)
    result = {"servers": list(out.values())}
    if not any("answered" in r for r in out.values()):
        result["why"] = (f"no server answered v{version} within {timeout_s:g} s (they serve "
                         f"{sorted({str(r.get('serves')) for r in out.values()})})")
    return result

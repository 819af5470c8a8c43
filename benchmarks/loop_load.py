"""The light load ``make bench-loop`` keeps on the server while the loop runs: one client, a ``POST /similarity`` every
``1/rps`` seconds, each answer's status and the version that answered it (``/metadata`` is polled beside it)."""

from __future__ import annotations

import json
import threading
import time
import urllib.request

from stsreg.product.serving.announce import served_version

PAIRS = {"sentence1": ["How do I reset my password?", "The cat sits on the mat."],
         "sentence2": ["Where can I change my password?", "A dog runs in the park."]}


class Load:
    """``with Load(url, rps) as load:`` sends requests on a thread until the block ends."""

    def __init__(self, url: str, rps: float):
        self.url, self.every = url, 1.0 / rps
        self.sent = self.failed = 0
        self.errors: list[str] = []
        self.latencies: list[float] = []
        self.versions: dict[str, float] = {}  # version -> when the metadata first said it
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _one(self) -> None:
        body = json.dumps(PAIRS).encode()
        request = urllib.request.Request(f"{self.url}/similarity", body, {"Content-Type": "application/json"})
        began = time.perf_counter()
        self.sent += 1
        try:
            with urllib.request.urlopen(request, timeout=30) as r:
                scores = json.loads(r.read()).get("score")
                if r.status != 200 or not scores or len(scores) != 2:
                    raise ValueError(f"status {r.status}, scores {scores}")
            self.latencies.append(time.perf_counter() - began)
        except (OSError, ValueError) as exc:  # HTTPError is an OSError
            self.failed += 1
            self.errors.append(f"{time.time():.1f}: {type(exc).__name__}: {exc}"[:300])
        version = served_version(self.url, timeout=5.0)
        if version is not None:
            self.versions.setdefault(version, time.time())

    def _loop(self) -> None:
        while not self._stop.is_set():
            began = time.monotonic()
            self._one()
            self._stop.wait(max(0.0, self.every - (time.monotonic() - began)))

    def wait_for(self, version: str, timeout_s: float) -> float | None:
        """When (epoch s) the server first said it serves ``version``; None after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while version not in self.versions and time.monotonic() < deadline:
            time.sleep(0.5)
        return self.versions.get(version)

    def summary(self) -> dict:
        lat = sorted(self.latencies)
        pick = (lambda q: round(1000 * lat[min(len(lat) - 1, int(q * len(lat)))], 1)) if lat else (lambda q: None)
        return {"sent": self.sent, "failed": self.failed, "errors": self.errors[:20], "p50_ms": pick(0.5),
                "p99_ms": pick(0.99), "max_ms": round(1000 * lat[-1], 1) if lat else None, "versions": self.versions}

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(60)

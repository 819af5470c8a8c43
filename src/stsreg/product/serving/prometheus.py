"""``GET /metrics``: what the server did, in Prometheus' text format (prometheus-client), one registry per app.

- ``stsreg_requests_total{endpoint, status}`` and ``stsreg_request_seconds{endpoint}`` (latency histogram);
- ``stsreg_batch_sentences`` (distinct sentences per encoder call) and ``stsreg_queue_wait_seconds`` (a request's
  wait before its batch started);
- ``stsreg_served_info{version, backend, precision, model_uri}`` = 1 (what is served now) and ``stsreg_ready``.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client import CONTENT_TYPE_LATEST  # noqa: F401 (the /metrics content type)

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096, 16384)


class Metrics:
    def __init__(self):
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter("stsreg_requests", "requests answered", ["endpoint", "status"], registry=r)
        self.latency = Histogram("stsreg_request_seconds", "time to answer a request", ["endpoint"],
                                 buckets=LATENCY_BUCKETS, registry=r)
        self.batch = Histogram("stsreg_batch_sentences", "distinct sentences per encoder call", buckets=BATCH_BUCKETS,
                               registry=r)
        self.wait = Histogram("stsreg_queue_wait_seconds", "a request's wait in the queue before its batch ran",
                              buckets=LATENCY_BUCKETS, registry=r)
        self.served = Gauge("stsreg_served_info", "the version served now (1) and how it runs",
                            ["version", "backend", "precision", "model_uri"], registry=r)
        self.ready = Gauge("stsreg_ready", "1 once a model is loaded and answering", registry=r)

    def observe_batch(self, sentences: int, waits: list[float]) -> None:
        self.batch.observe(sentences)
        for w in waits:
            self.wait.observe(w)

    def set_served(self, info: dict) -> None:
        self.served.clear()
        self.served.labels(str(info.get("version", "")), str(info.get("backend", "")), str(info.get("precision", "")),
                           str(info.get("model_uri", ""))).set(1)
        self.ready.set(1)

    def render(self) -> bytes:
        return generate_latest(self.registry)

"""``GET /metrics``: what the server did, in Prometheus' text format (prometheus-client), one registry per app.

- ``stsreg_requests_total{endpoint, status}`` (every answer, the request guard's refusals and 429s included) and
  ``stsreg_request_seconds{endpoint}`` (latency histogram);
- where a request's time goes: ``stsreg_tokenise_seconds``, ``stsreg_queue_wait_seconds`` (queued until its batch
  started), ``stsreg_encode_seconds`` (per encoder call), ``stsreg_respond_seconds`` (building and sending the answer);
- ``stsreg_batch_sentences`` (distinct sentences per encoder call), ``stsreg_batch_tokens`` (tokens per call),
  ``stsreg_queued_tokens`` (now);
- ``stsreg_refused_total{reason}``: queue_full (429), request_tokens (413), too_long (413, truncation off),
  client_gone (a caller left before its batch);
- ``stsreg_truncated_total``: texts cut at the model's maximum length;
- ``stsreg_served_info{version, backend, precision, model_uri}`` = 1 (what is served now) and ``stsreg_ready``.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client import CONTENT_TYPE_LATEST  # noqa: F401 (the /metrics content type)

LATENCY_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                   10.0, 30.0)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096, 16384, 65536)
#: The endpoints labelled by name; any other path is ``other`` (a bounded label set, whatever paths are sent).
ENDPOINTS = ("/invocations", "/v1/embeddings", "/similarity", "/health", "/ping", "/ready", "/metadata", "/metrics",
             "/version", "/openapi.json", "/docs")


class Metrics:
    def __init__(self):
        self.registry = r = CollectorRegistry()
        self.requests = Counter("stsreg_requests", "requests answered", ["endpoint", "status"], registry=r)
        self.latency = Histogram("stsreg_request_seconds", "time to answer a request", ["endpoint"],
                                 buckets=LATENCY_BUCKETS, registry=r)
        steps = {"tokenise": "tokenizing a request (on the tokenizer thread)",
                 "queue_wait": "a request's wait in the queue before its batch ran",
                 "encode": "one encoder call", "respond": "building and sending a request's answer"}
        self.tokenise, self.wait, self.encode, self.respond = (
            Histogram(f"stsreg_{k}_seconds", v, buckets=LATENCY_BUCKETS, registry=r) for k, v in steps.items())
        self.batch = Histogram("stsreg_batch_sentences", "distinct sentences per encoder call", buckets=BATCH_BUCKETS,
                               registry=r)
        self.batch_tokens = Histogram("stsreg_batch_tokens", "tokens per encoder call", buckets=BATCH_BUCKETS,
                                      registry=r)
        self.queued = Gauge("stsreg_queued_tokens", "tokens waiting for the encoder", registry=r)
        self.refused = Counter("stsreg_refused", "requests refused by the request path", ["reason"], registry=r)
        self.truncated = Counter("stsreg_truncated", "texts cut at the model's maximum length", registry=r)
        self.served = Gauge("stsreg_served_info", "the version served now (1) and how it runs",
                            ["version", "backend", "precision", "model_uri"], registry=r)
        self.ready = Gauge("stsreg_ready", "1 once a model is loaded and answering", registry=r)

    def count(self, path: str, status: int, seconds: float | None = None) -> None:
        """One answered request: its status (and its latency, when timed)."""
        endpoint = path if path in ENDPOINTS else "other"
        self.requests.labels(endpoint, str(status)).inc()
        if seconds is not None:
            self.latency.labels(endpoint).observe(seconds)

    def observe_batch(self, sentences: int, tokens: int, seconds: float) -> None:
        self.batch.observe(sentences)
        self.batch_tokens.observe(tokens)
        self.encode.observe(seconds)

    def set_served(self, info: dict) -> None:
        self.served.clear()
        self.served.labels(str(info.get("version", "")), str(info.get("backend", "")), str(info.get("precision", "")),
                           str(info.get("model_uri", ""))).set(1)
        self.ready.set(1)

    def render(self) -> bytes:
        return generate_latest(self.registry)

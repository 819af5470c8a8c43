"""The ASGI app of ``stsreg serve``: every endpoint answered by one batched request path.

- ``POST /invocations``: MLflow's scoring protocol (:mod:`.protocol`): pairs -> ``{"predictions": [{cosine,
  score}]}``, sentences -> ``[{embedding}]``;
- ``POST /v1/embeddings``: OpenAI's embeddings API (``input``, ``model``, ``encoding_format`` float / base64,
  ``dimensions``, ``usage``);
- ``POST /similarity``: ``{sentence1, sentence2}`` (strings or lists) -> ``{cosine, score, scale}`` on the served scale;
- ``GET /health``, ``/ping``: live: the process answers;
- ``GET /ready``: 200 once a model is loaded and has answered, 503 before (a load balancer's health check);
- ``GET /metadata``: what is served: version, backend, precision, device, max length, scale, what ``auto`` measured;
- ``GET /metrics``: Prometheus (:mod:`.prometheus`).

Errors are ``{"error_code", "message"}`` on every endpoint; a failure inside the server is a 500 whose message says
so, logged with its trace on the server, never sent. A pyfunc that is not a stsreg model is answered by MLflow's own
scoring app.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import threading
import time

import numpy as np

from stsreg.product.serving import protocol
from stsreg.product.serving.batcher import MicroBatcher
from stsreg.product.serving.prometheus import CONTENT_TYPE_LATEST, Metrics
from stsreg.product.serving.protocol import RequestError

log = logging.getLogger(__name__)
JSON = b"application/json"
ENDPOINTS = ("/invocations", "/v1/embeddings", "/similarity", "/health", "/ping", "/ready", "/metadata", "/metrics",
             "/version")


async def _send(send, status: int, body: bytes, content_type: bytes = JSON) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


async def _body(receive) -> bytes:
    chunks, more = [], True
    while more:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunks.append(message.get("body", b""))
        more = message.get("more_body", False)
    return b"".join(chunks)


class ServingApp:
    """``load()`` returns a :class:`~stsreg.product.serving.served.Served`; it runs on a thread at the first request
    (or :meth:`load_now`), so the process answers ``/health`` while the model loads; a request to a model endpoint
    meanwhile waits up to ``load_wait_s`` for it (then 503). ``batch_sentences`` / ``batch_wait_s``: the batcher's
    budget and wait; ``max_rows``: rows per request."""

    def __init__(self, load, max_rows: int = 20000, batch_sentences: int = 256, batch_wait_s: float = 0.002,
                 on_loaded=None, load_wait_s: float = 120.0):
        self.load, self.max_rows, self.on_loaded = load, max_rows, on_loaded or (lambda app: None)
        self.load_wait_s = load_wait_s
        self.served, self.fallback, self.load_error = None, None, None
        self.metrics = Metrics()
        self.batcher = MicroBatcher(lambda: self.served, batch_sentences, batch_wait_s, self.metrics.observe_batch)
        self._loading = threading.Lock()
        self.routes = {("POST", "/invocations"): self.invocations, ("POST", "/v1/embeddings"): self.embeddings,
                       ("POST", "/similarity"): self.similarity}

    # -- the model ---------------------------------------------------------------------------------
    def load_now(self) -> "ServingApp":
        with self._loading:
            if self.served is None:
                try:
                    self.swap(self.load())
                    self.on_loaded(self)
                except Exception as exc:  # noqa: BLE001 (reported at /ready and in the log)
                    self.load_error = f"{type(exc).__name__}: {exc}"
                    log.exception("loading the model failed")
                    raise
        return self

    def load_in_background(self) -> None:
        threading.Thread(target=lambda: self._quiet(self.load_now), name="load model", daemon=True).start()

    @staticmethod
    def _quiet(fn):
        try:
            fn()
        except Exception:  # noqa: BLE001 (logged by load_now)
            pass

    def swap(self, served) -> None:
        """Serve ``served`` from the next batch on (in-flight batches finish on the model they started with)."""
        if served.inner is None:
            from mlflow.pyfunc import scoring_server

            self.fallback = scoring_server.init(served.pyfunc)
        self.served = served
        self.metrics.set_served(served.info)

    @property
    def metadata(self) -> bytes:
        return json.dumps(self.served.info if self.served else {"ready": False}).encode()

    # -- ASGI ---------------------------------------------------------------------------------------
    async def __call__(self, scope, receive, send):
        if scope["type"] == "lifespan":
            return await self._lifespan(receive, send)
        if scope["type"] != "http":
            return None
        method, path = scope["method"], scope["path"]
        started, status = time.perf_counter(), 500
        try:
            status = await self._route(method, path, scope, receive, send)
        finally:
            endpoint = path if path in ENDPOINTS else "other"  # a bounded label set, whatever paths are sent
            self.metrics.requests.labels(endpoint, str(status)).inc()
            self.metrics.latency.labels(endpoint).observe(time.perf_counter() - started)

    async def _lifespan(self, receive, send):
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                self.batcher.close()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _route(self, method, path, scope, receive, send) -> int:
        if method == "GET" and path in ("/health", "/ping"):
            await _send(send, 200, b'{"status": "ok"}')
            return 200
        if method == "GET" and path == "/ready":
            ready = self.served is not None
            body = {"ready": ready, **({"version": self.served.info.get("version")} if ready else
                                       {"error_code": "NOT_READY", "message": self.load_error
                                        or "the model is loading"})}
            await _send(send, 200 if ready else 503, json.dumps(body).encode())
            return 200 if ready else 503
        if method == "GET" and path == "/metrics":
            await _send(send, 200, self.metrics.render(), CONTENT_TYPE_LATEST.encode())
            return 200
        if method == "GET" and path == "/metadata":
            await _send(send, 200, self.metadata)
            return 200
        if method == "GET" and path == "/version":
            import mlflow

            await _send(send, 200, json.dumps({"mlflow": mlflow.__version__}).encode())
            return 200
        waited = 0.0
        while self.served is None and self.load_error is None and waited < self.load_wait_s:
            await asyncio.sleep(0.1)  # a request sent as the server starts waits for the model, not a retry loop
            waited += 0.1
        if self.served is None:
            return await self._error(send, 503, self.load_error or "the model is loading; GET /ready says when it is "
                                                                   "served")
        if self.fallback is not None:
            await self.fallback(scope, receive, send)
            return 200
        handler = self.routes.get((method, path))
        if handler is None:
            known = any(p == path for _, p in self.routes)
            return await self._error(send, 405 if known else 404, f"{method} {path} is not an endpoint of this server"
                                     + ("" if known else "; POST /invocations, /v1/embeddings, /similarity"))
        headers = dict(scope.get("headers") or [])
        try:
            answer = await handler(await _body(receive), headers.get(b"content-type", b"").decode("latin-1").lower())
        except RequestError as exc:
            return await self._error(send, exc.status, exc.message)
        except Exception:  # noqa: BLE001 (never a trace or a path in a response)
            log.exception("%s %s failed", method, path)
            return await self._error(send, 500, "the server failed on this request (logged on the server)")
        await _send(send, 200, json.dumps(answer).encode())
        return 200

    @staticmethod
    async def _error(send, status: int, message: str) -> int:
        await _send(send, status, protocol.error_body(status, message))
        return status

    # -- endpoints ----------------------------------------------------------------------------------
    async def _pairs(self, parsed) -> tuple[np.ndarray, np.ndarray]:
        n = len(parsed.first)
        vectors, served = await self.batcher.embed(parsed.first + parsed.second)
        return served.pair_scores(vectors[:n], vectors[n:])

    async def invocations(self, body: bytes, content_type: str):
        parsed = protocol.parse_invocations(body, content_type, self.max_rows)
        if parsed.kind == "sentences":
            vectors, _ = await self.batcher.embed(parsed.first)
            return {"predictions": [{"embedding": v} for v in vectors.tolist()]}
        cosine, score = await self._pairs(parsed)
        return {"predictions": [{"cosine": c, "score": s} for c, s in zip(cosine.tolist(), score.tolist())]}

    async def similarity(self, body: bytes, content_type: str):
        parsed = protocol.parse_similarity(body, self.max_rows)
        cosine, score = await self._pairs(parsed)
        return {"cosine": cosine.tolist(), "score": score.tolist(), "scale": list(self.served.scale)}

    async def embeddings(self, body: bytes, content_type: str):
        texts, options = protocol.parse_embeddings(body, self.max_rows)
        vectors, served = await self.batcher.embed(texts)
        dim = int(vectors.shape[1])
        if options["dimensions"] is not None and options["dimensions"] != dim:
            raise RequestError(400, f"dimensions: this model gives {dim}-dimensional embeddings and does not shorten "
                                    f"them; omit dimensions or send {dim}")
        if options["encoding_format"] == "base64":
            data = [base64.b64encode(v.astype("<f4").tobytes()).decode() for v in vectors]
        else:
            data = vectors.tolist()
        tokens = served.count_tokens(texts)
        return {"object": "list", "model": options["model"] or served.info.get("model_uri"),
                "data": [{"object": "embedding", "index": i, "embedding": e} for i, e in enumerate(data)],
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}

"""The ASGI app of ``stsreg serve``: every endpoint answered by one batched request path.

- ``POST /invocations``: MLflow's scoring protocol (:mod:`.protocol`): pairs -> ``{"predictions": [{cosine,
  score}]}``, sentences -> ``[{embedding}]``;
- ``POST /v1/embeddings``: OpenAI's embeddings API (``input``, ``model``, ``encoding_format`` float / base64,
  ``dimensions``, ``usage``);
- ``POST /similarity``: ``{sentence1, sentence2}`` (strings or lists) -> ``{cosine, score, scale}`` on the served scale;
- ``GET /health``, ``/ping``: live: the process answers;
- ``GET /ready``: 200 once a model is loaded and has answered, 503 before (a load balancer's health check);
- ``GET /metadata``: what is served: version, backend, precision, device, max length, scale, what ``auto`` measured;
- ``GET /metrics``: Prometheus (:mod:`.prometheus`);
- ``GET /openapi.json``: the OpenAPI 3.1 description of all of this (:mod:`.openapi`), ``GET /docs`` the same as a page.

Every model request goes through one :class:`~stsreg.product.serving.batcher.TokenBatcher`: a full queue is a 429
with ``Retry-After``, a request larger than the queue (or a text over the maximum length with truncation off) a 413; a
text cut at the maximum length is said (``X-Truncated: n`` on every endpoint, ``usage.truncated`` in OpenAI's); a
client that disconnects while it waits is dropped from the queue. Errors are ``{"error_code", "message"}`` on every
endpoint; a failure inside the server is a 500 whose message says so, logged with its trace on the server, never
sent. A pyfunc that is not a stsreg model is answered by MLflow's own
scoring app.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import hashlib
import json
import logging
import threading
import time

import orjson

from stsreg.product.serving import openapi, protocol
from stsreg.product.serving.asgi_io import read_body, send_body, until_disconnect
from stsreg.product.serving.batcher import TokenBatcher
from stsreg.product.serving.prometheus import CONTENT_TYPE_LATEST, Metrics
from stsreg.product.serving.protocol import RequestError
from stsreg.product.serving.refusals import Overloaded, ShuttingDown, TooLarge
from stsreg.product.serving.server_config import Admission

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Incoming:
    """A model request as its endpoint reads it: the ``body`` (bytes), its ``content_type`` (lower case) and its
    ``client`` (:func:`client_of`: whose queue it waits in)."""

    body: bytes
    content_type: str
    client: str


def client_of(scope) -> str:
    """Who sends a request, for fairness between clients: its API key (``Authorization`` or ``X-API-Key``, kept as a
    short hash, never the key itself), else its peer address (a client without a key on one machine is one client,
    whether it opens one connection or two hundred)."""
    headers = dict(scope.get("headers") or [])
    key = headers.get(b"authorization") or headers.get(b"x-api-key")
    if key:
        return "key:" + hashlib.sha256(key).hexdigest()[:16]
    peer = scope.get("client")
    return f"addr:{peer[0]}" if peer else "addr:?"


class ServingApp:
    """``load()`` returns a :class:`~stsreg.product.serving.served.Served`; it runs on a thread at the first request
    (or :meth:`load_now`), so the process answers ``/health`` while the model loads; a request to a model endpoint
    meanwhile waits up to ``load_wait_s`` for it (then 503). ``admission``: the batcher's
    (:class:`~stsreg.product.serving.batcher.TokenBatcher`); ``max_rows``: rows per request."""

    def __init__(self, load, admission: Admission = Admission(), max_rows: int = 20000, on_loaded=None,
                 load_wait_s: float = 120.0):
        self.load, self.max_rows, self.on_loaded = load, max_rows, on_loaded or (lambda app: None)
        self.load_wait_s = load_wait_s
        self.served, self.fallback, self.load_error, self.dimension = None, None, None, None
        self.metrics = Metrics()
        self.batcher = TokenBatcher(lambda: self.served, admission, self.metrics)
        self._loading = threading.Lock()
        self._settled = threading.Event()  # set once the model is served or failed to load
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
                    self._settled.set()
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
        fallback = None
        if served.inner is None:
            from mlflow.pyfunc import scoring_server

            fallback = scoring_server.init(served.pyfunc)
        if fallback is None and getattr(served, "max_length", None):
            # what a request costs at each length, measured on this model before it serves (short and long texts)
            self.batcher.cost.calibrate(served, served.max_length)
        self.served, self.fallback = served, fallback
        self.dimension = openapi.dimension_of(served) if fallback is None else None
        self.metrics.set_served(served.info)
        self._settled.set()

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
        started, status = time.perf_counter(), 499  # 499: the client went away before its answer
        try:
            allowed = openapi.allowed(path)
            if allowed is not None and method not in allowed:  # RFC 9110: 405 names what the path answers
                status = await self._error(send, 405, f"{method} {path} is not an endpoint of this server; it "
                                                      f"answers {', '.join(allowed)}",
                                           ((b"allow", ", ".join(allowed).encode()),))
                return
            status = await self._route(method, path, scope, receive, send)
        finally:
            self.metrics.count(path, status, time.perf_counter() - started)

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
            await send_body(send, 200, b'{"status": "ok"}')
            return 200
        if method == "GET" and path == "/ready":
            ready = self.served is not None
            body = {"ready": ready, **({"version": self.served.info.get("version")} if ready else
                                       {"error_code": "NOT_READY", "message": self.load_error
                                        or "the model is loading"})}
            await send_body(send, 200 if ready else 503, json.dumps(body).encode())
            return 200 if ready else 503
        if method == "GET" and path == "/metrics":
            await send_body(send, 200, self.metrics.render(), CONTENT_TYPE_LATEST.encode())
            return 200
        if method == "GET" and path == "/metadata":
            await send_body(send, 200, self.metadata)
            return 200
        if method == "GET" and path in openapi.PAGES:
            body, content_type = openapi.PAGES[path](self.dimension)
            await send_body(send, 200, body, content_type)
            return 200
        if method == "GET" and path == "/version":
            import mlflow

            await send_body(send, 200, json.dumps({"mlflow": mlflow.__version__}).encode())
            return 200
        if self.served is None and self.load_error is None:  # sent as the server starts: it waits for the model
            await asyncio.get_running_loop().run_in_executor(None, self._settled.wait, self.load_wait_s)
        if self.served is None:
            return await self._error(send, 503, self.load_error or "the model is loading; GET /ready says when it is "
                                                                   "served")
        if self.fallback is not None:
            await self.fallback(scope, receive, send)
            return 200
        handler = self.routes.get((method, path))
        if handler is None:  # a described path with another method was a 405 in __call__
            return await self._error(send, 404, f"{method} {path} is not an endpoint of this server; POST "
                                                "/invocations, /v1/embeddings, /similarity")
        return await self._call(handler, method, path, scope, receive, send)

    def early_refusal(self, scope) -> Overloaded | None:
        """Before a model request's body is read: :class:`Overloaded` when its client's queue, with the request costing
        what the client's last one did, is past the time bound (or the token queue is full), else None
        (:meth:`TokenBatcher.refuse_early`)."""
        if self.served is None or self.fallback is not None or (scope["method"], scope["path"]) not in self.routes:
            return None
        try:
            self.batcher.refuse_early(client_of(scope))
        except Overloaded as exc:
            return exc
        return None

    async def overloaded(self, send, exc: Overloaded, unread: bool = False) -> int:
        """The 429 of a refused request, with Retry-After. ``unread``: refused before its body was read, so the
        connection is closed with the answer (``Connection: close``): the server never parses the body it refused (a
        client that ignores Retry-After and sends 200 connections of 170 KB bodies back to back kept the event loop
        parsing them, and the requests it had admitted never reached the encoder)."""
        headers = ((b"retry-after", str(exc.retry_after).encode()),) + (((b"connection", b"close"),) if unread else ())
        return await self._error(send, 429, str(exc), headers)

    async def _call(self, handler, method, path, scope, receive, send) -> int:
        """Run a model endpoint's handler on the request's body while watching for the client to leave; answer."""
        headers = dict(scope.get("headers") or [])
        incoming = Incoming(await read_body(receive), headers.get(b"content-type", b"").decode("latin-1").lower(),
                            client_of(scope))
        work = asyncio.ensure_future(handler(incoming))
        gone = asyncio.ensure_future(until_disconnect(receive))
        try:
            await asyncio.wait({work, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            gone.cancel()
        if not work.done():  # the client went away: its request leaves the queue, nothing is sent
            work.cancel()
            return 499
        try:
            answer, truncated = work.result()
        except RequestError as exc:
            return await self._error(send, exc.status, exc.message)
        except Overloaded as exc:
            return await self.overloaded(send, exc)
        except TooLarge as exc:
            return await self._error(send, 413, str(exc))
        except ShuttingDown as exc:
            return await self._error(send, 503, str(exc))
        except Exception:  # noqa: BLE001 (never a trace or a path in a response)
            log.exception("%s %s failed", method, path)
            return await self._error(send, 500, "the server failed on this request (logged on the server)")
        responding = time.perf_counter()
        # orjson: an answer of 64 vectors is 0.45 ms of the event loop against json's 9.5 ms (the same values: a
        # float32's float64 in its shortest round-trip form, as json writes it); NaN, which json wrote as the
        # invalid literal NaN, is null
        await send_body(send, 200, orjson.dumps(answer),
                    headers=((b"x-truncated", str(truncated).encode()),) if truncated else ())
        self.metrics.respond.observe(time.perf_counter() - responding)
        return 200

    @staticmethod
    async def _error(send, status: int, message: str, headers: tuple = ()) -> int:
        await send_body(send, status, protocol.error_body(status, message), headers=headers)
        return status

    # -- endpoints: each returns (the answer, how many of its texts were cut at the maximum length) ------------
    async def _pairs(self, parsed, client: str):
        n = len(parsed.first)
        embedded = await self.batcher.embed(parsed.first + parsed.second, client)
        cosine, score = embedded.model.pair_scores(embedded.vectors[:n], embedded.vectors[n:])
        return cosine, score, embedded

    async def invocations(self, incoming: Incoming):
        parsed = protocol.parse_invocations(incoming.body, incoming.content_type, self.max_rows)
        if parsed.kind == "sentences":
            embedded = await self.batcher.embed(parsed.first, incoming.client)
            return {"predictions": [{"embedding": v} for v in embedded.vectors.tolist()]}, len(embedded.truncated)
        cosine, score, embedded = await self._pairs(parsed, incoming.client)
        return ({"predictions": [{"cosine": c, "score": s} for c, s in zip(cosine.tolist(), score.tolist())]},
                len(embedded.truncated))

    async def similarity(self, incoming: Incoming):
        parsed = protocol.parse_similarity(incoming.body, incoming.content_type, self.max_rows)
        cosine, score, embedded = await self._pairs(parsed, incoming.client)
        return ({"cosine": cosine.tolist(), "score": score.tolist(), "scale": list(embedded.model.scale)},
                len(embedded.truncated))

    async def embeddings(self, incoming: Incoming):
        texts, options = protocol.parse_embeddings(incoming.body, incoming.content_type, self.max_rows)
        embedded = await self.batcher.embed(texts, incoming.client)
        vectors, served = embedded.vectors, embedded.model
        dim = int(vectors.shape[1])
        if options["dimensions"] is not None and options["dimensions"] != dim:
            raise RequestError(400, f"dimensions: this model gives {dim}-dimensional embeddings and does not shorten "
                                    f"them; omit dimensions or send {dim}")
        if options["encoding_format"] == "base64":
            data = [base64.b64encode(v.astype("<f4").tobytes()).decode() for v in vectors]
        else:
            data = vectors.tolist()
        cut = len(embedded.truncated)
        return {"object": "list", "model": options["model"] or served.info.get("model_uri"),
                "data": [{"object": "embedding", "index": i, "embedding": e} for i, e in enumerate(data)],
                "usage": {"prompt_tokens": embedded.tokens, "total_tokens": embedded.tokens, "truncated": cut}}, cut

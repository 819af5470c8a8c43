"""``stsreg serve``: the project's own serving app (:class:`stsreg.product.serving.app.ServingApp`: MLflow's
``/invocations``, OpenAI's ``/v1/embeddings``, ``/similarity``, ``/metrics``, ``/ready``, ``/metadata``, every request
through one batched encoder) for a registered model, behind a request guard that answers before the app sees a
request:

- a body over ``max_body_bytes`` (declared or streamed) -> 413 with the limit;
- JSON nested deeper than ``max_depth`` -> 400 (``dataframe_records`` needs 3 levels, ``dataframe_split`` 4);
- no ``Content-Type`` header -> 415.

``GET /metadata`` says what is served: the model URI and version, the precision setting and what it resolved to on
this host (``bf16``/``fp32``), the device, the maximum sequence length (the evaluated one, stored with the version),
the backend running the encoder (:mod:`stsreg.infra.backend_specs`; ``auto`` measures at start which is fastest here)
and the exports' quality. A pyfunc that is not a stsreg model is answered by MLflow's own scoring app.

The precision is ``serve.precision`` in params.yaml (``auto``: bf16 where the hardware has it natively, as the
evaluation), overridden by ``stsreg serve --precision fp32``; it is printed at start.

    stsreg serve                                   # models:/sts-regression@champion on 127.0.0.1:5001
    curl -X POST 127.0.0.1:5001/invocations -H 'Content-Type: application/json' \\
         -d '{"dataframe_records": [{"sentence1": "A man plays.", "sentence2": "A man is playing."}]}'
    curl -X POST 127.0.0.1:5001/invocations -H 'Content-Type: application/json' \\
         -d '{"dataframe_records": [{"sentence": "A man plays."}]}'          # its embedding

The model is looked up in the project's store (:func:`stsreg.infra.tracking.tracking_uri`: the running servers, else
``mlflow/mlflow.db`` under the working folder); a missing store, alias or server is a one-line error (exit 2).
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import threading

import numpy as np

from stsreg.product.serving import openapi
from stsreg.product.serving.asgi_io import send_body
from stsreg.product.serving.model_uri import served_version
from stsreg.product.serving.protocol import error_body
from stsreg.product.serving.server_config import DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_DEPTH, ServerConfig

_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.S)  # JSON string literals (their brackets do not nest anything)
_STEP = np.zeros(256, dtype=np.int8)
_STEP[[ord("["), ord("{")]], _STEP[[ord("]"), ord("}")]] = 1, -1


def json_depth(body: bytes) -> int:
    """Deepest ``[``/``{`` nesting of a JSON text, brackets inside strings ignored; linear, no recursion."""
    skeleton = np.frombuffer(_STRING.sub(b'""', body), dtype=np.uint8)
    if skeleton.size == 0:
        return 0
    return int(np.cumsum(_STEP[skeleton], dtype=np.int32).max(initial=0))


async def _reply(send, status: int, message: str) -> None:
    await send_body(send, status, error_body(status, message))


class RequestGuard:
    """ASGI middleware: reads a request's body up to ``max_body_bytes`` within ``timeout_s`` (408 after: a half-sent
    body holds nothing for long), checks its JSON nesting, then replays it to ``app``. Requests without a body (GET
    /ping) pass straight through. Every refusal is counted in the app's ``/metrics``. ``metadata``: the app's (what
    it serves now, JSON bytes)."""

    def __init__(self, app, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES, max_depth: int = DEFAULT_MAX_DEPTH,
                 timeout_s: float = 30.0):
        self.app, self.max_body_bytes, self.max_depth, self.timeout_s = app, max_body_bytes, max_depth, timeout_s

    async def _refuse(self, scope, send, status: int, message: str) -> None:
        metrics = getattr(self.app, "metrics", None)
        if metrics is not None:
            metrics.count(scope["path"], status)
        await _reply(send, status, message)

    @property
    def metadata(self) -> bytes:
        return self.app.metadata

    async def __call__(self, scope, receive, send):
        described = openapi.allowed(scope["path"]) if scope["type"] == "http" else None
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS") \
                or (described is not None and scope["method"] not in described):
            return await self.app(scope, receive, send)  # no body to guard, or a 405 the app answers
        too_large = f"request body over {self.max_body_bytes} bytes; split the batch into smaller requests"
        headers = dict(scope.get("headers") or [])
        if not headers.get(b"content-type", b"").strip():
            return await self._refuse(scope, send, 415, "missing Content-Type header; send application/json (or "
                                                        "text/csv)")
        declared = headers.get(b"content-length", b"").strip()
        if declared.isdigit() and int(declared) > self.max_body_bytes:
            return await self._refuse(scope, send, 413, too_large)
        early = getattr(self.app, "early_refusal", lambda scope: None)(scope)
        if early is not None:  # its client's queue is past the bound with it: refused before its body is read
            self.app.metrics.count(scope["path"], 429)
            await self.app.overloaded(send, early, unread=True)
            return None  # an ASGI app returns None: uvicorn logs an error for anything else (one per refusal)
        chunks, size, more = [], 0, True
        deadline = asyncio.get_running_loop().time() + self.timeout_s
        while more:
            try:
                message = await asyncio.wait_for(receive(), deadline - asyncio.get_running_loop().time())
            except asyncio.TimeoutError:
                return await self._refuse(scope, send, 408, f"the request body did not arrive within {self.timeout_s:g}"
                                                            " s")
            if message["type"] == "http.disconnect":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                return await self._refuse(scope, send, 413, too_large)
            chunks.append(chunk)
            more = message.get("more_body", False)
        body = b"".join(chunks)
        if b"json" in headers[b"content-type"].lower():
            depth = json_depth(body)
            if depth > self.max_depth:
                return await self._refuse(scope, send, 400, f"JSON nested {depth} levels deep; at most "
                                                            f"{self.max_depth} are accepted")
        sent = False

        async def replay():
            nonlocal sent
            if sent:
                return await receive()  # after the body: disconnect notices come from the real channel
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        return await self.app(scope, replay, send)


def build_app(config: ServerConfig, lazy: bool = False, on_loaded=None) -> RequestGuard:
    """The guarded serving app (:class:`stsreg.product.serving.app.ServingApp` behind :class:`RequestGuard`) that
    ``config`` describes: its version loaded computing as ``config.compute``, requests admitted as
    ``config.admission`` (a request admitted only if the encoder will have answered it within ``answer_within_s`` at
    its measured rate, else 429 at once with Retry-After the seconds until there is room), bodies guarded by its
    limits; an alias (``config.model_uri``) followed every ``config.follow_s`` s (> 0), a moved alias's version
    swapped in. ``lazy``: load on a thread (``/ready`` is 503 until then; ``on_loaded(app)`` runs once loaded)
    instead of before returning. ``.metadata`` says what it serves."""
    from stsreg.product.serving.app import ServingApp
    from stsreg.product.serving.served import Follower, Served

    def load():
        version = served_version(config.model_uri, config.tracking_uri) if config.model_uri else None
        served = Served(config.artifact_uri, config.tracking_uri, config.compute, version)
        if config.follow_s > 0 and config.model_uri:
            Follower(config.model_uri, config.tracking_uri, config.compute, config.follow_s,
                     lambda: app.served.version, app.swap).start()
        return served

    app = ServingApp(load, config.admission, on_loaded=on_loaded)
    if lazy:
        app.load_in_background()
    else:
        app.load_now()
    return RequestGuard(app, config.max_body_bytes, config.max_depth, config.body_timeout_s)


#: The environment variable through which :func:`serve` hands its :class:`ServerConfig` (JSON) to its worker processes.
APP_CONFIG = "STSREG_SERVE_CONFIG"


def app_from_env() -> RequestGuard:
    """:func:`build_app` of the :class:`ServerConfig` in :data:`APP_CONFIG`: the factory each worker process calls. It
    loads before returning: a worker accepts connections on the shared port only once its model answers."""
    return build_app(ServerConfig.model_validate_json(os.environ[APP_CONFIG]))


def serve(app, config: ServerConfig | None = None, host: str = "127.0.0.1", port: int = 5001,
          workers: int = 1) -> None:
    """Serve ``app`` (what :func:`build_app` returns for ``config``) until interrupted (uvicorn, on its C parser and
    event loop where installed). ``workers`` > 1: that many processes, each building its own app from ``config``
    (its backend resolved, not ``auto``, so that every worker runs the same one) and sharing the port. On SIGTERM the
    server stops taking connections and gives the requests in flight ``config.drain_s`` seconds (None: 30 s; a batch
    is bounded in encoder time, so the encoder frees up within one batch's); idle keep-alive connections close after
    5 s."""
    import uvicorn

    drain_s = config.drain_s if config is not None else 30.0
    common = {"host": host, "port": port, "log_level": "warning", "timeout_graceful_shutdown": drain_s,
              "timeout_keep_alive": 5}
    if workers == 1:
        _drained(lambda: uvicorn.run(app, **common))
        return
    os.environ[APP_CONFIG] = config.model_dump_json()
    _drained(lambda: uvicorn.run(f"{__name__}:app_from_env", factory=True, workers=workers, **common))


def _drained(run) -> None:
    """``run()`` (uvicorn) with SIGTERM ending it cleanly: uvicorn drains on SIGTERM, then raises the signal again to
    the handler it found, which would end the process with 143 after a drain that went well. While it runs that
    handler only notes the signal, so a drained server returns and the process exits 0; a SIGTERM before (the model
    loading) still ends it with 143 (:func:`stsreg.product.serving.announce.announced`)."""
    if threading.current_thread() is not threading.main_thread():
        run()
        return
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: None)
    try:
        run()
    finally:
        signal.signal(signal.SIGTERM, previous)

"""The flood's floor: an ASGI app that answers ``GET /health`` 200 and every other request 429 at once, its body
unread, with ``Connection: close`` (what ``stsreg serve``'s early refusal sends). Served by uvicorn as ``stsreg
serve`` is (its C parser and event loop, one process), it shows what a refusal costs the HTTP layer alone: the
fewest CPU seconds a server can spend on the flood and the 429 latency no server on the same cores can beat.
``python -m benchmarks.serve_flood`` runs it as its last column (:data:`COMMAND`)."""

from __future__ import annotations

import sys

#: How the flood benchmark starts it (``{port}`` filled in), from the repository's root.
COMMAND = [sys.executable, "-m", "uvicorn", "benchmarks.refuse_only:app", "--port", "{port}", "--log-level",
           "warning", "--lifespan", "off", "--timeout-keep-alive", "5"]

_REFUSED = [(b"content-type", b"application/json"), (b"retry-after", b"1"), (b"connection", b"close")]


async def app(scope, receive, send):
    healthy = scope["method"] == "GET" and scope["path"] == "/health"
    await send({"type": "http.response.start", "status": 200 if healthy else 429,
                "headers": _REFUSED[:1] if healthy else _REFUSED})
    await send({"type": "http.response.body", "body": b'{"status": "ok"}' if healthy else b'{"error": "overloaded"}'})

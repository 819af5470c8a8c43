"""The few ASGI moves the server makes: send a whole answer, read a whole body, notice a client that went away."""

from __future__ import annotations

JSON = b"application/json"


async def send_body(send, status: int, body: bytes, content_type: bytes = JSON, headers: tuple = ()) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", content_type), (b"content-length", str(len(body)).encode()),
                            *headers]})
    await send({"type": "http.response.body", "body": body})


async def until_disconnect(receive) -> None:
    """Returns once the client has gone (the body was read before: what comes next is the disconnect notice)."""
    while (await receive())["type"] != "http.disconnect":
        pass


async def read_body(receive) -> bytes:
    chunks, more = [], True
    while more:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunks.append(message.get("body", b""))
        more = message.get("more_body", False)
    return b"".join(chunks)

"""Admission by cost and fairness between clients in the request path's batcher, on a toy encoder whose text of n
tokens costs n * n (attention: a long text's token is dearer than a short one's). Bounds are in the toy's own
seconds (sleeps), not a machine's speed.

- a flood of long texts, after a start that measured short and long texts: every request admitted is answered within
  the time bound (none waits past it to end as a 499), the others are refused at once with a Retry-After;
- one client's flood (many concurrent requests) never stops another client: its short requests are answered within
  a few batches while the flood goes on;
- a request past its client's bound is refused from its estimated cost before it is tokenized (the app refuses a
  client whose queue alone is past it before reading the body: tests/unit/test_serving_app.py).
"""

import asyncio
import time

import pytest

from stsreg.product.serving.batcher import TokenBatcher
from stsreg.product.serving.refusals import Overloaded
from stsreg.product.serving.server_config import Admission
from tests.helpers.toy_served import Words

def _long(n: int) -> list[str]:
    """``n`` distinct texts of 64 tokens (64 * 64 * 2e-5 = 0.082 s of the toy encoder each; distinct, as the encoder
    encodes a repeated text once)."""
    global _made
    _made += n
    return [f"t{_made - k} " + " ".join(f"w{i}" for i in range(63)) for k in range(n)]


_made = 0
SHORT = "a man plays"  # 3 tokens: 0.0002 s
MAX_WAIT_S = 2.0


def _run(calls, **settings):
    model = Words(s_per_square_token=2e-5, max_length=64)

    async def main():
        batcher = TokenBatcher(lambda: model, Admission(batch_tokens=256, max_queued_tokens=1 << 20,
                                                        answer_within_s=MAX_WAIT_S, **settings))
        batcher.cost.calibrate(model, model.max_length)  # what the app does when a model is loaded
        try:
            return await calls(batcher)
        finally:
            batcher.close()

    return asyncio.run(main())


async def _timed(batcher, texts, client):
    started = time.perf_counter()
    try:
        await batcher.embed(texts, client)
        return "ok", time.perf_counter() - started, None
    except Overloaded as exc:
        return "429", time.perf_counter() - started, exc.retry_after


def test_the_start_measures_that_a_long_texts_token_costs_more():
    async def calls(batcher):
        return batcher.cost.seconds([64]) / 64, batcher.cost.seconds([3]) / 3

    long_token, short_token = _run(calls)
    assert long_token > 5 * short_token  # one rate for all lengths would admit a long flood 20x too much


def test_a_long_flood_is_admitted_by_its_cost_and_every_admitted_request_is_answered_within_the_bound():
    """40 concurrent requests of 16 long texts (1.3 s of encoder each, 52 s in all) against a 2 s bound."""
    async def calls(batcher):
        return await asyncio.gather(*(_timed(batcher, _long(16), "flood") for _ in range(40)))

    answers = _run(calls)
    served = [s for kind, s, _ in answers if kind == "ok"]
    refused = [(s, retry) for kind, s, retry in answers if kind == "429"]
    assert 1 <= len(served) <= 4 and len(refused) >= 36, (len(served), len(refused))
    assert max(served) < MAX_WAIT_S + 0.5, served  # answered within the bound (and one batch): no 499 for waiting
    assert max(s for s, _ in refused) < 0.2, refused  # refused at once
    assert all(1 <= retry <= 4 for _, retry in refused), refused


def test_one_clients_flood_does_not_stop_another_client():
    """Client A keeps its queue full of long texts for ~6 s; client B sends one short pair at a time meanwhile: each
    is answered within a few batches (a batch here is at most 0.33 s), not behind A's queue."""
    async def calls(batcher):
        stop = asyncio.Event()

        async def flood():
            answered = 0
            while not stop.is_set():
                kind, _, retry = await _timed(batcher, _long(4), "A")
                answered += kind == "ok"
                if kind == "429":
                    await asyncio.sleep(0.05)
            return answered

        flooders = [asyncio.ensure_future(flood()) for _ in range(20)]
        await asyncio.sleep(1.0)  # A's queue is at its bound
        polite = []
        for _ in range(10):
            kind, seconds, _ = await _timed(batcher, [SHORT, "someone plays music"], "B")
            polite.append((kind, seconds))
            await asyncio.sleep(0.3)
        stop.set()
        return polite, sum(await asyncio.gather(*flooders))

    polite, flood_answered = _run(calls)
    assert all(kind == "ok" for kind, _ in polite), polite
    assert max(s for _, s in polite) < 1.0, polite  # A's queue holds ~2 s; B waits for about one batch
    assert flood_answered >= 10  # the flood is served too, its share of the encoder


def test_a_request_past_the_bound_is_refused_before_it_is_tokenized_and_another_client_is_not():
    """A's queue holds 1.3 s of its 2 s bound: its next request (1.3 s more) is refused from its estimated cost before
    the tokenizer sees it, in milliseconds; a smaller one of B is admitted (B shares the encoder with A from now on)."""
    async def calls(batcher):
        first = asyncio.ensure_future(_timed(batcher, _long(16), "A"))
        await asyncio.sleep(0.2)
        tokenized = len(batcher.current().tokenized)
        again = await _timed(batcher, _long(16), "A")
        untouched = len(batcher.current().tokenized) == tokenized
        other = await _timed(batcher, _long(4), "B")
        return again, untouched, other, await first

    again, untouched, other, first = _run(calls)
    assert first[0] == "ok" and other[0] == "ok"
    assert again[0] == "429" and again[1] < 0.05 and again[2] >= 1 and untouched


def test_over_http_a_client_past_the_bound_is_refused_before_its_body_is_read_and_others_are_served():
    """Through the guarded app on loopback: a client (by its API key) whose admitted request alone outlasts the bound
    sends another whose body never comes: 429 with Retry-After at once (reading the body would have been a 408 after
    the 2 s body timeout); a client with another key is answered meanwhile. The server logs no error for it (an ASGI
    app that returns a value gets one from uvicorn, which under a flood is a line per refusal)."""
    import logging
    import socket
    import threading

    import requests

    from stsreg.product.serving.app import ServingApp
    from tests.helpers.toy_served import ToyServed, guarded_on_loopback

    model = ToyServed(s_per_square_token=0.002)  # an 8-token text: 0.128 s
    app = ServingApp(lambda: model, Admission(batch_tokens=8, max_queued_tokens=4096, answer_within_s=0.5)).load_now()
    url, server, thread = guarded_on_loopback(app)
    port = int(url.rsplit(":", 1)[1])
    errors = []
    handler = logging.Handler(logging.ERROR)
    handler.emit = errors.append
    logging.getLogger("uvicorn.error").addHandler(handler)
    try:
        # 8 texts, 1 s alone: admitted on an empty queue, one text per batch; its queue then outlasts the bound
        big = [" ".join(f"w{i}x{k}" for i in range(8)) for k in range(8)]
        long_one = threading.Thread(target=requests.post, args=(url + "/similarity",),
                                    kwargs={"json": {"sentence1": big[:4], "sentence2": big[4:]},
                                            "headers": {"Authorization": "Bearer flood"}, "timeout": 30})
        long_one.start()
        time.sleep(0.2)
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            sock.sendall(b"POST /similarity HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer flood\r\n"
                         b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n")  # no body follows
            started = time.perf_counter()
            head = sock.recv(4096).decode("latin-1")
            refused_s = time.perf_counter() - started
        assert head.startswith("HTTP/1.1 429") and "retry-after:" in head.lower(), head
        assert refused_s < 0.5, refused_s
        polite = requests.post(url + "/similarity", json={"sentence1": "a man", "sentence2": "a person"},
                               headers={"Authorization": "Bearer polite"}, timeout=30)
        assert polite.status_code == 200, polite.text
        long_one.join(30)
        assert not [record.getMessage() for record in errors]
    finally:
        logging.getLogger("uvicorn.error").removeHandler(handler)
        server.should_exit = True
        thread.join(10)


def test_a_clients_next_request_is_taken_to_cost_what_its_last_did_and_refused_before_it_is_read():
    """After A's first request A's queue holds its cost: a next request costing the same would take A's queue past
    the bound and is refused before it is read; a client without a queue (B) is let through to be read."""
    async def calls(batcher):
        first = asyncio.ensure_future(_timed(batcher, _long(16), "A"))
        await asyncio.sleep(0.2)
        with pytest.raises(Overloaded) as refused:
            batcher.refuse_early("A")
        batcher.refuse_early("B")
        return refused.value.retry_after, await first

    retry_after, first = _run(calls)
    assert retry_after >= 1 and first[0] == "ok"

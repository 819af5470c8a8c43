"""Continuous batching on a token budget (TEI's ``max_batch_tokens``): the sentences of concurrent requests encoded
together, the encoder never idle while anything waits and never waiting for more.

A request is tokenized on a tokenizer thread (off the event loop, :data:`TOKENIZE_CHUNK` texts at a time, so requests
interleave there too), admitted if the queue has room for its tokens and, with ``max_wait_s``, if the encoder will
have reached it within ``max_wait_s`` at its measured rate (else :class:`Overloaded`: the server's 429, at once when
the queue is already full, with Retry-After the seconds until it has drained enough; a request larger than the whole
queue is :class:`TooLarge`, a 413) and queued as *pieces* of at most ``batch_tokens`` tokens each (a large request
is split, its vectors reassembled in order). Whenever the encoder is free, the consumer takes queued pieces up to
``batch_tokens`` tokens, round robin over the waiting requests (a 20,000-pair request shares the encoder with the
one-pair requests that arrive behind it), and encodes their distinct sentences in one call on the encoder thread.
Each caller gets its own rows back with the model that encoded them: a request is tokenized and encoded by the model
served when it arrived, all its pieces alike (a model swapped in meanwhile serves the requests after it).

Nothing a request does reaches another: a batch that fails is encoded again request by request so that only the
request that fails alone gets the error; a caller that goes away (cancelled) is dropped from the queue; an error
anywhere in the consumer fails the requests of that batch and the consumer goes on. Every step is timed into
:class:`~stsreg.product.serving.prometheus.Metrics` (tokenise, queue wait, encode) and every refusal counted.

    batcher = TokenBatcher(lambda: served, batch_tokens=4096, max_queued_tokens=262144)
    embedded = await batcher.embed(["a man plays", "a man is playing"])   # .vectors (2, d) float32, .model, ...
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor

from stsreg.product import tokens
from stsreg.product.serving.prometheus import Metrics
from stsreg.product.serving.queued import (Embedded, Overloaded, Request, ShuttingDown, TooLarge, deliver, fail,
                                           pieces)

__all__ = ["Embedded", "Overloaded", "ShuttingDown", "TokenBatcher", "TooLarge"]

log = logging.getLogger(__name__)

#: Texts per tokenizer call: small enough that a large request yields the tokenizer thread every few milliseconds.
TOKENIZE_CHUNK = 256


class TokenBatcher:
    """``current()`` returns the served model at arrival: anything with ``tokenize(list[str]) -> (table, truncated
    indices)`` (:func:`stsreg.product.tokens.request_table`) and ``encode_tokens(table) -> (n, d) array``.
    ``truncate``: whether a text over the maximum length is cut (and said) or refused (:class:`TooLarge`)."""

    def __init__(self, current, batch_tokens: int = 4096, max_queued_tokens: int = 262144, truncate: bool = True,
                 metrics: Metrics | None = None, max_wait_s: float | None = None):
        self.current, self.batch_tokens, self.max_queued_tokens = current, batch_tokens, max_queued_tokens
        self.truncate, self.metrics, self.max_wait_s = truncate, metrics or Metrics(), max_wait_s
        self.waiting: deque[Request] = deque()
        self.queued_tokens = 0
        self.rate = 0.0  # tokens per second the encoder has done, a moving average (Retry-After's estimate)
        self.encoder = ThreadPoolExecutor(max_workers=1, thread_name_prefix="encoder")
        self.tokenizer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tokenizer")
        self.wake: asyncio.Event | None = None
        self.consumer: asyncio.Task | None = None

    def _start(self) -> None:
        if self.consumer is None or self.consumer.done():
            self.wake = asyncio.Event()
            self.consumer = asyncio.get_running_loop().create_task(self._consume())

    # -- admission -----------------------------------------------------------------------------------
    async def embed(self, sentences: list[str]) -> Embedded:
        """(n,) sentences -> their :class:`Embedded`; :class:`Overloaded` / :class:`TooLarge` when refused."""
        self._start()
        self._refuse_early()
        model = self.current()
        started = time.perf_counter()
        table, cut = await self._tokenize(model, sentences)
        self.metrics.tokenise.observe(time.perf_counter() - started)
        self.metrics.truncated.inc(len(cut))
        request = Request(sentences, table, model, asyncio.get_running_loop().create_future(),
                          pieces(table[tokens.LENGTH], self.batch_tokens), cut=cut)
        self._admit(request)
        try:
            return await request.future
        except asyncio.CancelledError:  # the caller went away: its pieces leave the queue
            self._drop(request)
            raise

    async def _tokenize(self, model, sentences: list[str]) -> tuple[dict, list[int]]:
        """``model.tokenize`` on the tokenizer thread, :data:`TOKENIZE_CHUNK` texts at a time: the requests that
        arrive meanwhile are tokenized between its chunks (a 20,000-text request does not hold the thread for
        seconds), and a caller that goes away stops at the next chunk (it was tokenized to its end before)."""
        loop, tables, cut = asyncio.get_running_loop(), [], []
        for start in range(0, len(sentences), TOKENIZE_CHUNK):
            table, chunk_cut = await loop.run_in_executor(self.tokenizer, model.tokenize,
                                                          sentences[start:start + TOKENIZE_CHUNK])
            tables.append(table)
            cut += [start + i for i in chunk_cut]
        return (tables[0] if len(tables) == 1 else tokens.concat(tables)), cut

    def _wait_s(self, tokens_ahead: int) -> float:
        """Seconds the encoder needs for ``tokens_ahead`` tokens at its measured rate (0 before it has measured)."""
        return tokens_ahead / self.rate if self.rate else 0.0

    def _refuse_early(self) -> None:
        """Before tokenizing: refuse at once (milliseconds, not after a tokenizer queue) when the queue is already
        full, in tokens or in time (``max_wait_s``); Retry-After: when it will have drained enough."""
        over = self._wait_s(self.queued_tokens) - self.max_wait_s if self.max_wait_s and self.rate else 0.0
        if self.queued_tokens >= self.max_queued_tokens or over > 0:
            self.metrics.refused.labels("queue_full").inc()
            room = over or self._wait_s(self.queued_tokens - self.max_queued_tokens + self.batch_tokens)
            raise Overloaded(self.queued_tokens, self.max_queued_tokens, max(1, math.ceil(room or 1)))

    def _admit(self, request: Request) -> None:
        lengths = request.table[tokens.LENGTH]
        if request.cut and not self.truncate:
            i = request.cut[0]
            self.metrics.refused.labels("too_long").inc()
            raise TooLarge(f"input {i} is over the model's maximum length of {max(lengths[i] for i in request.cut)} "
                           f"tokens ({len(request.cut)} such); this server does not truncate (serve.truncate)")
        size = sum(lengths)
        if size > self.max_queued_tokens:
            self.metrics.refused.labels("request_tokens").inc()
            raise TooLarge(f"{size} tokens in one request; at most {self.max_queued_tokens} are taken "
                           "(serve.max_queued_tokens): split the batch")
        # the queue's bound in time: an admitted request is answered within max_wait_s at the measured rate
        late = self._wait_s(self.queued_tokens + size) - self.max_wait_s if self.max_wait_s else 0.0
        if late > 0 and self._wait_s(size) > self.max_wait_s:  # too long even alone: it waits for an empty queue
            late = self._wait_s(self.queued_tokens)
        if self.queued_tokens + size > self.max_queued_tokens or late > 0:
            self.metrics.refused.labels("queue_full").inc()
            # Retry-After: the seconds until the queue has drained enough for this request (not the whole queue)
            room = max(late, self._wait_s(self.queued_tokens + size - self.max_queued_tokens))
            raise Overloaded(self.queued_tokens, self.max_queued_tokens, max(1, math.ceil(room or 1)))
        self.waiting.append(request)
        self._queued(size)
        self.wake.set()

    def _queued(self, change: int) -> None:
        self.queued_tokens += change
        self.metrics.queued.set(self.queued_tokens)

    def _drop(self, request: Request) -> None:
        if request in self.waiting:
            self.waiting.remove(request)
        left = sum(request.cost(p) for p in request.pieces)
        if left:
            self._queued(-left)
            self.metrics.refused.labels("client_gone").inc()
        request.pieces.clear()

    # -- the consumer --------------------------------------------------------------------------------
    async def _consume(self) -> None:
        while True:
            await self.wake.wait()
            batch = self._take()
            if not batch:
                self.wake.clear()
                continue
            try:
                await self._run(batch)
            except Exception as exc:  # noqa: BLE001 (the consumer never dies: this batch's callers get the error)
                log.exception("a batch failed outside the encoder")
                for request, _ in batch:
                    fail(request, exc)

    def _take(self) -> list[tuple[Request, tuple[int, int]]]:
        """Queued pieces up to the token budget, one per request in turn, all of one model."""
        batch, budget, model, behind = [], self.batch_tokens, None, []
        while self.waiting:
            request = self.waiting.popleft()
            if request.future.done() or not request.pieces:
                continue
            model = request.model if model is None else model
            cost = request.cost(request.pieces[0])
            if batch and cost > budget:  # the next batch starts with it
                self.waiting.appendleft(request)
                break
            if request.model is not model:  # arrived before a swap: encoded by its own model, in a batch of its own
                behind.append(request)
                continue
            batch.append((request, request.pieces.popleft()))
            budget -= cost
            self._queued(-cost)
            if request.pieces:
                behind.append(request)  # round robin: its next piece waits behind the requests now queued
        self.waiting.extend(behind)
        return batch

    async def _run(self, batch: list[tuple[Request, tuple[int, int]]]) -> None:
        loop = asyncio.get_running_loop()
        model = batch[0][0].model
        texts = [r.sentences[i] for r, (a, b) in batch for i in range(a, b)]
        table = tokens.concat([tokens.take(r.table, range(a, b)) for r, (a, b) in batch])
        first = {t: i for i, t in reversed(list(enumerate(texts)))}  # each distinct text encoded once
        unique = sorted(first.values())
        started = time.perf_counter()
        for request, _ in batch:
            self.metrics.wait.observe(started - request.queued)
        try:
            vectors = await loop.run_in_executor(self.encoder, model.encode_tokens, tokens.take(table, unique))
        except Exception as exc:  # noqa: BLE001 (one request's input may have failed them all: see _each_alone)
            await self._each_alone(batch, exc)
            return
        seconds = time.perf_counter() - started
        if len(vectors) != len(unique):  # caught by _consume: this batch's callers get it, the consumer goes on
            raise ValueError(f"the encoder gave {len(vectors)} vectors for {len(unique)} sentences")
        size = sum(table[tokens.LENGTH])
        self.metrics.observe_batch(len(unique), size, seconds)
        now = size / max(seconds, 1e-6)
        self.rate = now if not self.rate else 0.8 * self.rate + 0.2 * now
        row = {texts[i]: k for k, i in enumerate(unique)}
        offset = 0
        for request, (a, b) in batch:
            deliver(request, a, vectors[[row[t] for t in texts[offset:offset + b - a]]])
            offset += b - a

    async def _each_alone(self, batch, exc: Exception) -> None:
        """A failed batch: with one request in it, that request fails; else each piece is encoded on its own and
        only the requests whose own piece fails get an error."""
        if len({id(r) for r, _ in batch}) == 1:
            fail(batch[0][0], exc)
            return
        loop = asyncio.get_running_loop()
        for request, (a, b) in batch:
            if request.future.done():
                continue
            try:
                vectors = await loop.run_in_executor(self.encoder, request.model.encode_tokens,
                                                     tokens.take(request.table, range(a, b)))
            except Exception as own:  # noqa: BLE001 (this caller answers it)
                fail(request, own)
                continue
            deliver(request, a, vectors)

    def close(self) -> None:
        """Stop: the waiting requests are answered with an error (the server is going away)."""
        for request in self.waiting:
            fail(request, ShuttingDown("the server is shutting down; send the request again"))
        self.waiting.clear()
        if self.consumer is not None:
            self.consumer.cancel()
        self.encoder.shutdown(wait=False, cancel_futures=True)
        self.tokenizer.shutdown(wait=False, cancel_futures=True)

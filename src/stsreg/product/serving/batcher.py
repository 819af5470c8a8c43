"""Continuous batching on a token budget (TEI's ``max_batch_tokens``), admitted by what a request costs the encoder and
served fairly between clients.

A request is tokenized on a tokenizer thread (off the event loop, :data:`TOKENIZE_CHUNK` texts at a time, so requests
interleave there too) and queued as *pieces* of at most ``batch_tokens`` tokens each (a large request is split, its
vectors reassembled in order) in its **client's** queue (``client``: an API key or the peer's address, given by the
app). Whenever the encoder is free, the consumer builds a batch up to ``batch_tokens`` tokens, one piece at a time from
the client that has been served the least encoder time (start-time fair queuing: a client that comes back from idle
starts at the current virtual time, not with credit; within a client, the request with the fewest pieces left), and
encodes its distinct sentences in one call on the encoder thread. So a flood from one client (one connection or two
hundred) shares the encoder with a client sending one short pair: the short pair waits for about one batch, not for
the flood.

Admission is by cost (:class:`~stsreg.product.serving.encoder_cost.EncoderCost`: seconds per token by text length,
measured at start and from every batch): with ``answer_within_s``, a request is admitted only if, served fairly, it will
be answered within ``answer_within_s`` — its client's queue and itself, plus what every other client may be served
meanwhile (each at most as much as it) — else :class:`Overloaded` (the server's 429) with Retry-After the seconds until
its client's queue has drained enough. The check runs first before anything is read or tokenized, taking the request to
cost what its client's last one did (:meth:`TokenBatcher.refuse_early`: a flood repeats itself, and is refused in
microseconds), and a request being
tokenized holds a reservation of its estimated cost, so a hundred requests in the tokenizer's line cannot all be
admitted behind each other's backs. A request larger than the whole token queue is :class:`TooLarge` (a 413). Each
caller gets its own rows back with the model that encoded them: a request is tokenized and encoded by the model
served when it arrived, all its pieces alike (a model swapped in meanwhile serves the requests after it).

Nothing a request does reaches another: a batch that fails is encoded again request by request so that only the
request that fails alone gets the error; a caller that goes away (cancelled) is dropped from the queue; an error
anywhere in the consumer fails the requests of that batch and the consumer goes on. Every step is timed into
:class:`~stsreg.product.serving.prometheus.Metrics` (tokenise, queue wait, encode) and every refusal counted.

    batcher = TokenBatcher(lambda: served, Admission(batch_tokens=4096, max_queued_tokens=262144, answer_within_s=30))
    embedded = await batcher.embed(["a man plays", "a man is playing"], client="addr:10.0.0.7")  # .vectors (2, d)
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections import defaultdict, deque
from concurrent.futures import ThreadPoolExecutor

from stsreg.product import tokens
from stsreg.product.serving.encoder_cost import EncoderCost
from stsreg.product.serving.prometheus import Metrics
from stsreg.product.serving.queued import Embedded, Request, deliver, fail, pieces
from stsreg.product.serving.refusals import Overloaded, ShuttingDown, TooLarge
from stsreg.product.serving.server_config import Admission

__all__ = ["TokenBatcher"]

log = logging.getLogger(__name__)

#: Texts per tokenizer call: small enough that a large request yields the tokenizer thread every few milliseconds.
TOKENIZE_CHUNK = 256
#: Characters per token of English text, to guess a request's lengths before it is tokenized (its reservation).
CHARS_PER_TOKEN = 4
#: Encoder seconds below which a client has nothing queued (what the sums of estimates leave behind).
QUEUED_S = 1e-3
#: Clients whose last request's cost is remembered for refusing before a body is read.
CLIENTS_REMEMBERED = 10000
#: The encoder seconds one batch holds at most (beside ``batch_tokens``): what a short request of another client may
#: find in the encoder when it arrives, so it waits for about this long, however long the texts of a flood are (a
#: batch of 4,096 tokens of 256-token texts took 2.3 s on 2 CPU cores; of short pairs 0.1 s).
BATCH_SECONDS = 0.25


def _guessed_lengths(sentences: list[str], max_length: int | None) -> list[int]:
    """Each text's token count guessed from its characters (at most ``max_length``): what a request holds while it
    is tokenized, replaced by its real count once it is."""
    cap = max_length or 1 << 30
    return [min(cap, 2 + len(s) // CHARS_PER_TOKEN) for s in sentences]


class TokenBatcher:
    """``current()`` returns the served model at arrival: anything with ``tokenize(list[str]) -> (table, truncated
    indices)`` (:func:`stsreg.product.tokens.request_table`) and ``encode_tokens(table) -> (n, d) array``.
    ``admission``: the token budget of a batch and of the queue, whether a text over the maximum length is cut (and
    said) or refused (:class:`TooLarge`), and the bound in time an admitted request is answered within
    (:class:`~stsreg.product.serving.server_config.Admission`)."""

    def __init__(self, current, admission: Admission = Admission(), metrics: Metrics | None = None):
        self.current, self.metrics = current, metrics or Metrics()
        self.batch_tokens, self.max_queued_tokens = admission.batch_tokens, admission.max_queued_tokens
        self.truncate, self.answer_within_s = admission.truncate, admission.answer_within_s
        self.queues: dict[str, deque[Request]] = {}  # client -> its requests in order (clients with work only)
        self.service: dict[str, float] = {}  # client -> encoder seconds it has been given (its virtual time)
        self.backlog: dict[str, float] = defaultdict(float)  # client -> estimated seconds queued or reserved
        self.virtual = 0.0  # the virtual time of the last piece taken: where a client coming back starts
        self.last_cost: dict[str, float] = {}  # client -> encoder seconds of its latest request
        self.queued_tokens = 0
        self.cost = EncoderCost()
        self.batch_s = 0.0  # the last batch's seconds: the one a new request may find in the encoder
        self.encoder = ThreadPoolExecutor(max_workers=1, thread_name_prefix="encoder")
        self.tokenizer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tokenizer")
        self.wake: asyncio.Event | None = None
        self.consumer: asyncio.Task | None = None

    def _start(self) -> None:
        if self.consumer is None or self.consumer.done():
            self.wake = asyncio.Event()
            self.consumer = asyncio.get_running_loop().create_task(self._consume())

    # -- admission -----------------------------------------------------------------------------------
    async def embed(self, sentences: list[str], client: str = "") -> Embedded:
        """(n,) sentences of ``client`` -> their :class:`Embedded`; :class:`Overloaded` / :class:`TooLarge` when
        refused."""
        self._start()
        self.refuse_early(client)
        model = self.current()
        # held while the request is tokenized: its estimated cost, so the requests behind it in the tokenizer's line
        # see it (a flood of a hundred cannot all pass the check before any of them is queued)
        reserved = self.cost.seconds(_guessed_lengths(sentences, getattr(model, "max_length", None)))
        self._check(client, reserved)
        self.backlog[client] += reserved
        started = time.perf_counter()
        try:
            table, cut = await self._tokenize(model, sentences)
        finally:
            self._unreserve(client, reserved)
        self.metrics.tokenise.observe(time.perf_counter() - started)
        self.metrics.truncated.inc(len(cut))
        request = Request(sentences, table, model, asyncio.get_running_loop().create_future(),
                          pieces(table[tokens.LENGTH], self.batch_tokens, self.cost.text_seconds, BATCH_SECONDS),
                          cut=cut, client=client)
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

    def wait_s(self, client: str, seconds: float) -> float:
        """When a request of ``seconds`` of encoder from ``client`` would be answered, served fairly: the batch in the
        encoder, its client's queue and itself, and what each other client may be served meanwhile (at most as much
        as it: start-time fair queuing)."""
        own = self.backlog.get(client, 0.0) + seconds
        others = sum(min(left, own) for c, left in self.backlog.items() if c != client)
        return self.batch_s + own + others

    def refuse_early(self, client: str) -> None:
        """Before anything of a request is read or tokenized: refuse at once when its client's queue, with the request
        costing what that client's last one did (a flood repeats itself), will not be answered within
        ``answer_within_s``, or the token queue is full. Retry-After: the seconds until the client's queue has drained
        enough (its share of the encoder at least), or the token queue has. A flood's requests are then refused
        without their bodies read or parsed."""
        predicted = self.last_cost.get(client, 0.0)
        bounded = self.answer_within_s and self.cost.measured
        late = self.wait_s(client, predicted) - self.answer_within_s if bounded else 0.0
        # only a client with work queued: one that waits for each answer is never refused unread (it gets the
        # guard's own answers, a 400 for a malformed body, and the admission check once its texts are known)
        if self.queued_tokens >= self.max_queued_tokens or (late > 0 and self.backlog.get(client, 0.0) > QUEUED_S):
            self._overloaded(max(late, self._drain_s(self.queued_tokens - self.max_queued_tokens + self.batch_tokens)))

    def _check(self, client: str, seconds: float) -> None:
        """Refuse a request of ``seconds`` of encoder that would not be answered within ``answer_within_s``. A request
        that alone needs more than the bound can never meet it: it is taken whenever its client has nothing queued
        (and the batch in the encoder is within the bound), never refused for ever."""
        if not self.answer_within_s or not self.cost.measured:
            return
        late = self.wait_s(client, seconds) - self.answer_within_s
        if late > 0 and seconds > self.answer_within_s:  # Retry-After then: until its client's queue has drained
            late = self.wait_s(client, 0.0) if self.backlog.get(client, 0.0) else self.batch_s - self.answer_within_s
        if late > 0:
            self._overloaded(late)

    def _overloaded(self, room_s: float):
        self.metrics.refused.labels("queue_full").inc()
        raise Overloaded(self.queued_tokens, self.max_queued_tokens, max(1, math.ceil(room_s or 1)))

    def _drain_s(self, tokens_ahead: int) -> float:
        """Seconds the encoder needs for ``tokens_ahead`` tokens at its last batches' pace (0 before it has run)."""
        if tokens_ahead <= 0 or not self.cost.measured:
            return 0.0
        return tokens_ahead * min(self.cost.per_token.values())

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
        if self.queued_tokens + size > self.max_queued_tokens:
            self._overloaded(self._drain_s(self.queued_tokens + size - self.max_queued_tokens))
        request.est = self.cost.seconds(lengths)
        self._remember(request.client, request.est)
        self._check(request.client, request.est)
        queue = self.queues.get(request.client)
        if queue is None:  # back from idle: it starts at the current virtual time, with no credit banked
            queue = self.queues[request.client] = deque()
            self.service[request.client] = max(self.service.get(request.client, 0.0), self.virtual)
        queue.append(request)
        self.backlog[request.client] += request.est
        self._queued(size)
        self.wake.set()

    def _remember(self, client: str, seconds: float) -> None:
        """A client's latest request's encoder seconds: what its next request is taken to cost before it is read
        (the clients remembered are bounded: the oldest is forgotten first)."""
        self.last_cost.pop(client, None)
        self.last_cost[client] = seconds
        if len(self.last_cost) > CLIENTS_REMEMBERED:
            self.last_cost.pop(next(iter(self.last_cost)))

    def _unreserve(self, client: str, seconds: float) -> None:
        self.backlog[client] -= seconds
        self._forget_if_idle(client)

    def _forget_if_idle(self, client: str) -> None:
        """A client with no queue and nothing but the sums' rounding left in its backlog has nothing queued."""
        if client not in self.queues and self.backlog.get(client, 0.0) <= QUEUED_S:
            self.backlog.pop(client, None)

    def _queued(self, change: int) -> None:
        self.queued_tokens += change
        self.metrics.queued.set(self.queued_tokens)

    def _drop(self, request: Request) -> None:
        queue = self.queues.get(request.client)
        if queue is not None and request in queue:
            queue.remove(request)
            if not queue:
                del self.queues[request.client]
        left = sum(request.cost(p) for p in request.untaken)
        if left:
            self._queued(-left)
            self.metrics.refused.labels("client_gone").inc()
        self._unreserve(request.client, request.est)
        request.est = 0.0
        request.untaken.clear()

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
        """Queued pieces up to the token budget and :data:`BATCH_SECONDS` of encoder, all of one model, each from the
        client served least so far."""
        batch, budget, model, passed, took = [], self.batch_tokens, None, set(), 0.0
        while budget > 0 and took < BATCH_SECONDS:
            waiting = [c for c in self.queues if c not in passed]
            if not waiting:
                break
            client = min(waiting, key=self.service.__getitem__)
            queue = self.queues[client]
            # within a client, the request with the fewest pieces left (the first of those): a small request is not
            # held behind a large one of its client, and equal requests finish one after another rather than all
            # together at the end (a flood's admitted requests then come back while it goes on)
            request = min(queue, key=lambda r: len(r.untaken) if r.untaken and not r.future.done() else -1)
            if request.future.done() or not request.untaken:
                self._done_with(queue, client, request)
                continue
            model = request.model if model is None else model
            piece = request.untaken[0]
            cost = request.cost(piece)
            seconds = min(request.est, self.cost.seconds(request.table[tokens.LENGTH][piece[0]:piece[1]]))
            if request.model is not model or (batch and (cost > budget or took + seconds > BATCH_SECONDS)):
                passed.add(client)  # its own batch, or the next one
                continue
            request.untaken.popleft()
            took += seconds
            self.virtual = self.service[client]
            self.service[client] += seconds
            request.est -= seconds
            self._unreserve(client, seconds)
            batch.append((request, piece))
            budget -= cost
            self._queued(-cost)
            if not request.untaken:
                self._done_with(queue, client, request)
        return batch

    def _done_with(self, queue: deque, client: str, done: Request) -> None:
        """``done``, of ``client``'s queue, has nothing left to take: off the queue, and the client off the round when
        its queue is empty (its virtual time kept only while ahead of the others)."""
        queue.remove(done)
        if done.est > 0:  # what was estimated beyond the pieces' own costs
            self._unreserve(client, done.est)
            done.est = 0.0
        if not queue:
            del self.queues[client]
            self._forget_if_idle(client)
            if self.service.get(client, 0.0) <= self.virtual:
                self.service.pop(client, None)

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
        encoded = [table[tokens.LENGTH][i] for i in unique]
        self.metrics.observe_batch(len(unique), sum(encoded), seconds)
        self.cost.observe(encoded, seconds)
        self.batch_s = seconds
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
        for queue in self.queues.values():
            for request in queue:
                fail(request, ShuttingDown("the server is shutting down; send the request again"))
        self.queues.clear()
        if self.consumer is not None:
            self.consumer.cancel()
        self.encoder.shutdown(wait=False, cancel_futures=True)
        self.tokenizer.shutdown(wait=False, cancel_futures=True)

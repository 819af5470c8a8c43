"""What waits in :class:`~stsreg.product.serving.batcher.TokenBatcher`'s queue: a request (its tokens, its model,
its pieces of at most ``batch_tokens`` tokens and the vectors computed so far), how it is answered or failed, and the
refusals the queue gives (429, 413, 503)."""

from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from stsreg.product import tokens


class Overloaded(Exception):
    """The queue holds as many tokens as it may: try again in ``retry_after`` seconds."""

    def __init__(self, queued: int, limit: int, retry_after: int):
        super().__init__(f"the server is busy: {queued} tokens queued of {limit}; retry in {retry_after} s")
        self.retry_after = retry_after


class ShuttingDown(Exception):
    """The server is stopping: a request still queued is answered with this (503)."""


class TooLarge(Exception):
    """A request of more tokens than the queue may ever hold, or (``truncate`` off) a text over the maximum length."""


@dataclass
class Embedded:
    """A request's answer: ``vectors`` (n, d) float32 in its order, the ``model`` that encoded them, the ``tokens``
    it read and the indices of the texts ``truncated`` at the model's maximum length."""

    vectors: np.ndarray
    model: object
    tokens: int
    truncated: list[int]


@dataclass
class Request:
    sentences: list[str]
    table: dict
    model: object
    future: asyncio.Future
    pieces: deque  # (start, stop) row ranges not yet taken, in order
    parts: dict = field(default_factory=dict)  # start -> (rows, d) vectors encoded so far
    queued: float = field(default_factory=time.perf_counter)
    cut: list[int] = field(default_factory=list)
    client: str = ""  # whose queue it waits in (an API key or a peer address)
    est: float = 0.0  # encoder seconds still estimated for its pieces not yet taken

    def cost(self, piece: tuple[int, int]) -> int:
        return sum(self.table[tokens.LENGTH][piece[0]:piece[1]])


def pieces(lengths: list[int], budget: int, text_seconds, max_s: float) -> deque:
    """Consecutive row ranges of at most ``budget`` tokens each and at most ``max_s`` of encoder each (``text_seconds``:
    a text's length -> its encoder seconds, :meth:`~stsreg.product.serving.encoder_cost.EncoderCost.text_seconds`, 0
    before anything was measured); a row over either is a range alone: a piece of long texts is as short in time as
    one of short texts."""
    out, start, size, took = deque(), 0, 0, 0.0
    for i, n in enumerate(lengths):
        cost = text_seconds(n)
        if i > start and (size + n > budget or took + cost > max_s):
            out.append((start, i))
            start, size, took = i, 0, 0.0
        size += n
        took += cost
    out.append((start, len(lengths)))
    return out


def deliver(request: Request, start: int, vectors) -> None:
    """One piece's vectors; the request is answered once every piece is in, in its order."""
    request.parts[start] = np.asarray(vectors, dtype=np.float32)
    if request.future.done() or request.pieces or sum(len(v) for v in request.parts.values()) < len(request.sentences):
        return
    stacked = np.concatenate([request.parts[k] for k in sorted(request.parts)])
    if stacked.shape[0] != len(request.sentences):
        raise ValueError(f"the encoder gave {stacked.shape[0]} vectors for {len(request.sentences)} sentences")
    request.future.set_result(Embedded(stacked, request.model, sum(request.table[tokens.LENGTH]), request.cut))


def fail(request: Request, exc: BaseException) -> None:
    request.pieces.clear()
    if not request.future.done():
        request.future.set_exception(exc)

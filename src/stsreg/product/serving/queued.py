"""What waits in :class:`~stsreg.product.serving.batcher.TokenBatcher`'s queue: a request (its tokens, its model,
the pieces not yet taken, of at most ``batch_tokens`` tokens each, and the vectors encoded so far), and how it is
answered (:class:`Embedded`) or failed. The refusals the queue gives are :mod:`stsreg.product.serving.refusals`."""

from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from stsreg.product import tokens


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
    untaken: deque  # (start, stop) row ranges not yet taken by a batch, in order (:func:`pieces`)
    encoded: dict = field(default_factory=dict)  # start of a range -> its (rows, d) vectors, once encoded
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
    request.encoded[start] = np.asarray(vectors, dtype=np.float32)
    if request.future.done() or request.untaken or sum(map(len, request.encoded.values())) < len(request.sentences):
        return
    stacked = np.concatenate([request.encoded[k] for k in sorted(request.encoded)])
    if stacked.shape[0] != len(request.sentences):
        raise ValueError(f"the encoder gave {stacked.shape[0]} vectors for {len(request.sentences)} sentences")
    request.future.set_result(Embedded(stacked, request.model, sum(request.table[tokens.LENGTH]), request.cut))


def fail(request: Request, exc: BaseException) -> None:
    request.untaken.clear()
    if not request.future.done():
        request.future.set_exception(exc)

"""Dynamic batching: the sentences of concurrent requests encoded in one call.

Requests wait in a queue. One consumer takes the first, then keeps taking whatever else arrives until the batch holds
``max_sentences`` sentences or ``max_wait_s`` has passed since the first was taken (a lone request waits at most that
long); a request larger than the budget is a batch of its own. The batch's distinct sentences go to the encoder in one
call on one worker thread (the encoder sorts them by length and pads each sub-batch to its longest: little padding),
and each caller gets its own rows back, in its order, with the model that encoded them (a model swapped in meanwhile
serves the next batch; this one finishes on the old). While a batch runs, the next one gathers: the queue is the
buffer, the encoder never waits for the network.

    batcher = MicroBatcher(lambda: served, max_sentences=256, max_wait_s=0.002)
    vectors, model = await batcher.embed(["a man plays", "a man is playing"])   # (2, d) float32
"""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np


@dataclass
class _Job:
    sentences: list[str]
    future: asyncio.Future
    queued: float = field(default_factory=time.perf_counter)


class MicroBatcher:
    """``current()`` returns the served model (anything with ``encode(list[str]) -> (n, d) array``) at batch time;
    ``observe(batch_sentences, queue_waits)`` records each batch (metrics)."""

    def __init__(self, current, max_sentences: int = 256, max_wait_s: float = 0.002, observe=None):
        self.current, self.max_sentences, self.max_wait_s = current, max_sentences, max_wait_s
        self.observe = observe or (lambda size, waits: None)
        self.queue: asyncio.Queue | None = None
        self.worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="encoder")
        self.consumer: asyncio.Task | None = None

    def _start(self) -> None:
        if self.consumer is None or self.consumer.done():
            self.queue = asyncio.Queue()
            self.consumer = asyncio.get_running_loop().create_task(self._consume())

    async def embed(self, sentences: list[str]):
        """(n,) sentences -> ((n, d) float32 embeddings in their order, the model that computed them)."""
        self._start()
        job = _Job(sentences, asyncio.get_running_loop().create_future())
        await self.queue.put(job)
        return await job.future

    async def _gather(self) -> list[_Job]:
        jobs = [await self.queue.get()]
        size, deadline = len(jobs[0].sentences), time.perf_counter() + self.max_wait_s
        while size < self.max_sentences:
            remaining = deadline - time.perf_counter()
            try:
                job = self.queue.get_nowait() if remaining <= 0 else await asyncio.wait_for(self.queue.get(), remaining)
            except (asyncio.QueueEmpty, asyncio.TimeoutError):
                break
            jobs.append(job)
            size += len(job.sentences)
        return jobs

    async def _consume(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            jobs = await self._gather()
            started = time.perf_counter()
            unique = list(dict.fromkeys(s for job in jobs for s in job.sentences))
            model = self.current()
            try:
                vectors = await loop.run_in_executor(self.worker, model.encode, unique)
            except Exception as exc:  # noqa: BLE001 (the callers answer it; the consumer keeps serving)
                await self._each_alone(jobs, model, exc)
                continue
            self.observe(len(unique), [started - job.queued for job in jobs])
            _answer(jobs, unique, vectors, model)

    async def _each_alone(self, jobs: list[_Job], model, exc: Exception) -> None:
        """A batch that failed: with one request, that request fails; with several, one request's input may have
        failed them all, so each is encoded on its own and only the requests that fail alone get their error."""
        if len(jobs) == 1:
            if not jobs[0].future.done():
                jobs[0].future.set_exception(exc)
            return
        loop = asyncio.get_running_loop()
        for job in jobs:
            unique = list(dict.fromkeys(job.sentences))
            try:
                vectors = await loop.run_in_executor(self.worker, model.encode, unique)
            except Exception as own:  # noqa: BLE001 (this caller answers it)
                if not job.future.done():
                    job.future.set_exception(own)
                continue
            _answer([job], unique, vectors, model)

    def close(self) -> None:
        if self.consumer is not None:
            self.consumer.cancel()
        self.worker.shutdown(wait=False, cancel_futures=True)


def _answer(jobs: list[_Job], unique: list[str], vectors, model) -> None:
    """Each job its own rows of ``vectors`` (the embeddings of ``unique``), in its order, with the model."""
    row = {s: i for i, s in enumerate(unique)}
    for job in jobs:
        if not job.future.done():
            job.future.set_result((vectors[[row[s] for s in job.sentences]], model))


def as_array(vectors) -> np.ndarray:
    """A torch tensor or array of embeddings -> a float32 numpy array."""
    return vectors.float().numpy() if hasattr(vectors, "numpy") and hasattr(vectors, "float") else np.asarray(vectors,
                                                                                                              np.float32)

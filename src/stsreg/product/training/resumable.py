"""The one resumable training loop: stage 2, stage 1's NLI encoder step, the NLI table's rows and every trained
baseline step through :func:`run_steps`.

What each step takes is :class:`Batches` (seeded per epoch, so a resumed run rebuilds the batches an uninterrupted
one took; split over DDP processes as torch's ``DistributedSampler`` splits them); what a resumed run restores is
its :class:`~stsreg.product.training.checkpoint.Checkpoint`; what a step does, and what it records, is the caller's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

from torch.utils.data.distributed import DistributedSampler

from stsreg.infra import progress, runtime
from stsreg.product.training.batches import epoch_batches
from stsreg.product.training.checkpoint import Checkpoint


@dataclass(frozen=True)
class Batches:
    """Which examples each step takes: ``epochs`` passes over ``n`` examples, this process's share (``rank`` of
    ``world_size``: every process takes ``ceil(n / world_size)`` of each epoch's order) in batches of ``batch_size``;
    each epoch's order drawn from a generator seeded with ``seed + epoch``; with ``lengths`` ((n,) padded length of
    each example) length-grouped (:func:`stsreg.product.training.batches.length_grouped`: the same number of batches,
    of similar-length examples)."""

    n: int
    batch_size: int
    epochs: int
    seed: int
    lengths: list[int] | None = None
    rank: int = 0
    world_size: int = 1

    @property
    def per_epoch(self) -> int:
        return math.ceil(math.ceil(self.n / self.world_size) / self.batch_size)

    @property
    def total(self) -> int:
        return self.per_epoch * self.epochs

    def of_epoch(self, epoch: int) -> list[list[int]]:
        """Epoch ``epoch``'s batches of example indices (with one process, the order is ``torch.randperm(n)``
        seeded with ``seed + epoch``)."""
        sampler = DistributedSampler(range(self.n), num_replicas=self.world_size, rank=self.rank, shuffle=True,
                                     seed=self.seed)
        sampler.set_epoch(epoch)
        return epoch_batches(list(sampler), self.batch_size, self.lengths, self.seed + epoch)


def run_steps(batches: Batches, step: Callable[[list[int], int], None], ckpt: Checkpoint, desc: str,
              after_step: Callable[[int, bool], dict | None] = lambda number, epoch_end: None) -> int:
    """Take ``batches``' steps from ``ckpt.state["step"]`` on (call ``ckpt.resume()`` first to continue a run):
    ``step(indices, number)`` takes optimizer step ``number`` (1-based) on the examples ``indices`` and records its
    loss as the caller wants; ``after_step(number, epoch_end)`` runs after each (a dev evaluation) and may return what
    the progress bar shows beside it. The checkpoint is written when its plan says and at each epoch end; with DDP,
    every process waits for the others after each step. Returns the steps taken, the resumed ones counted."""
    done = ckpt.state["step"]
    bar = progress.bar(total=batches.total, initial=done, desc=desc, unit="step", enabled=batches.rank == 0)
    for epoch in range(done // batches.per_epoch, batches.epochs):
        order = batches.of_epoch(epoch)
        for b in range(done - epoch * batches.per_epoch, len(order)):
            done += 1
            step(order[b], done)
            ckpt.state["step"] = done
            bar.update(1)
            epoch_end = b == len(order) - 1
            shown = after_step(done, epoch_end)
            if shown:
                bar.set_postfix(shown)
            if ckpt.due(done) or epoch_end:
                ckpt.save(batches.world_size, batches.rank)
            runtime.barrier()
    bar.close()
    return done

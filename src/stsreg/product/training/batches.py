"""Stage 2's batches and labels: which pairs go together in a step, and the label scale the loss sees."""

from __future__ import annotations

import torch

from stsreg.product import tokens


def pair_lengths(ids_a, ids_b) -> list[int]:
    """Tokens of the longer sentence of each pair (:meth:`SiameseRegressor.pretokenize` tables of both sides):
    what a batch pads to."""
    return [max(a, b) for a, b in zip(tokens.lengths(ids_a), tokens.lengths(ids_b))]


def length_grouped(order: list[int], lengths: list[int], batch_size: int, seed: int,
                   window: int = 50) -> list[list[int]]:
    """Batches of similar-length pairs: the shuffled ``order`` is cut into windows of ``window`` batches, each
    window sorted by length and cut into batches, then the batch order is shuffled. Random batches pad to their
    longest pair; grouped ones pad far less (same pairs per epoch, different batch composition)."""
    batches = []
    span = batch_size * window
    for start in range(0, len(order), span):
        chunk = sorted(order[start:start + span], key=lambda i: lengths[i])
        batches += [chunk[i:i + batch_size] for i in range(0, len(chunk), batch_size)]
    perm = torch.randperm(len(batches), generator=torch.Generator().manual_seed(seed)).tolist()
    return [batches[i] for i in perm]


def epoch_batches(order: list[int], batch_size: int, lengths: list[int] | None, seed: int) -> list[list[int]]:
    """One epoch's batches of indices from this process's shuffled ``order``: consecutive slices, or
    :func:`length_grouped` ones (seeded by ``seed``, so a resumed epoch rebuilds the same batches) when ``lengths``
    is given."""
    if lengths is not None:
        return length_grouped(order, lengths, batch_size, seed)
    return [order[i:i + batch_size] for i in range(0, len(order), batch_size)]


def adjust_labels(y: torch.Tensor, mode: str) -> torch.Tensor:
    """STS labels (>= 0) as stage 2 trains on them: ``raw``; ``round`` (nearest integer, halves to even);
    ``truncate`` (``int(score)`` as the authors' code does: 3.8 -> 3, not rounding)."""
    if mode == "raw":
        return y
    if mode == "round":
        return y.round()
    if mode == "truncate":
        return y.trunc()
    raise ValueError(f"unknown label mode {mode!r}")

"""What every baseline system is: a pair scorer, and (for the Siamese ones) a sentence encoder.

- :class:`PairScorer`: ``forward(s1, s2)`` -> ``(batch,)`` similarity with gradients, on the scale the system is
  trained on: the STS label / 5 (0-1) for every trained system here. :meth:`PairScorer.score` scores a whole table
  without gradients. A cross-encoder is only this: it reads the two sentences together and yields no sentence
  embedding.
- :class:`BiEncoder`: a :class:`PairScorer` whose score is ``cosine(encode(s1), encode(s2))`` (-1..1) of sentence
  embeddings ``encode(sentences) -> (batch, d)``; :meth:`BiEncoder.score` encodes each distinct sentence once.

Precision: :attr:`PairScorer.amp_dtype` (``None`` = fp32; the transformer systems set it from ``model.precision``,
see :mod:`stsreg.product.precision`) is the autocast dtype of :meth:`PairScorer.autocast`, which training and scoring
run under. Weights stay fp32; scores come back as fp32.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from tqdm.auto import tqdm

from stsreg.product import precision as amp
from stsreg.product.data.catalogue import unique_sentences


class PairScorer(nn.Module):
    """A model of pair similarity. Subclasses implement :meth:`forward`."""

    #: what the system runs on (a backbone name, ``GloVe 6B 50d``, ``from scratch`` ...), shown in the table
    runs_on: str = ""
    #: autocast dtype of training and scoring (``None``: fp32)
    amp_dtype: torch.dtype | None = None

    def forward(self, s1: list[str], s2: list[str]) -> torch.Tensor:  # pragma: no cover - abstract
        """(batch,), (batch,) sentences -> (batch,) similarity (trained target: label / 5, 0-1)."""
        raise NotImplementedError

    @property
    def device(self) -> torch.device:
        first = next(self.parameters(), None)
        return first.device if first is not None else torch.device("cpu")

    def autocast(self):
        """Context running the model in :attr:`amp_dtype` (a no-op for fp32)."""
        return amp.autocast(self.amp_dtype, self.device)

    def pair_lengths(self, s1: list[str], s2: list[str]) -> list[int]:
        """(n,), (n,) sentences -> (n,) the length a batch of the pair pads to (here: characters of the longer
        sentence; token-based systems count tokens). Length-grouped training batches sort by it."""
        return [max(len(a), len(b)) for a, b in zip(s1, s2)]

    @torch.no_grad()
    def score(self, s1: list[str], s2: list[str], batch_size: int = 64, desc: str = "score") -> np.ndarray:
        """(n,), (n,) sentences -> (n,) float similarities, in input order; eval mode and :meth:`autocast` for the
        call."""
        was = self.training
        self.eval()
        out = np.empty(len(s1), dtype=np.float64)
        # length-sorted batches pad little (the sum of both lengths is what a cross-encoder reads)
        order = sorted(range(len(s1)), key=lambda i: -(len(s1[i]) + len(s2[i])))
        try:
            with self.autocast():
                for start in tqdm(range(0, len(order), batch_size), desc=desc, unit="batch", disable=None):
                    idx = order[start:start + batch_size]
                    out[idx] = self([s1[i] for i in idx], [s2[i] for i in idx]).float().cpu().numpy()
        finally:
            self.train(was)
        return out

    def n_parameters(self) -> tuple[int, int]:
        """(trainable, total) parameter counts."""
        params = list(self.parameters())
        return sum(p.numel() for p in params if p.requires_grad), sum(p.numel() for p in params)


class BiEncoder(PairScorer):
    """Siamese: one encoder for both sentences, cosine of the embeddings. Subclasses implement :meth:`encode`."""

    def encode(self, sentences: list[str]) -> torch.Tensor:  # pragma: no cover - abstract
        """(batch,) sentences -> (batch, d) embeddings (with gradients when enabled)."""
        raise NotImplementedError

    def forward(self, s1: list[str], s2: list[str]) -> torch.Tensor:
        # fp32 cosine whatever the encoder's autocast dtype (a bf16 cosine of near-identical pairs rounds to 1)
        return F.cosine_similarity(self.encode(list(s1)).float(), self.encode(list(s2)).float(), dim=-1)

    @torch.no_grad()
    def embed_all(self, sentences: list[str], batch_size: int = 64, desc: str = "encode") -> torch.Tensor:
        """(n,) sentences -> (n, d) float32 embeddings on CPU, in input order (length-sorted batches, under
        :meth:`autocast`)."""
        was = self.training
        self.eval()
        order = sorted(range(len(sentences)), key=lambda i: -len(sentences[i]))
        chunks, index = [], []
        try:
            with self.autocast():
                for start in tqdm(range(0, len(order), batch_size), desc=desc, unit="batch", disable=None):
                    idx = order[start:start + batch_size]
                    chunks.append(self.encode([sentences[i] for i in idx]).float().cpu())
                    index += idx
        finally:
            self.train(was)
        emb = torch.cat(chunks) if chunks else torch.empty(0, 0)
        out = torch.empty_like(emb)
        out[index] = emb
        return out

    @torch.no_grad()
    def score(self, s1: list[str], s2: list[str], batch_size: int = 64, desc: str = "encode") -> np.ndarray:
        unique, (i1, i2) = unique_sentences(s1, s2)
        emb = self.embed_all(unique, batch_size, desc)
        u, v = emb[i1], emb[i2]
        return F.cosine_similarity(u, v, dim=-1).double().numpy()

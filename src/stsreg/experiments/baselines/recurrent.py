"""Recurrent sentence encoders trained from scratch: RNN / LSTM / GRU, and an InferSent-style BiLSTM-max.

A sentence is tokenized into lowercase words (:func:`stsreg.experiments.baselines.wordvec.tokenize`), embedded, and run
through the recurrent layer; its embedding is the final hidden state (``pooling="last"``; both directions concatenated
when bidirectional) or the element-wise max over time of the outputs (``pooling="max"``, InferSent's BiLSTM-max).
Pair score: cosine of the two embeddings (:class:`~stsreg.experiments.baselines.scoring.BiEncoder`), trained with
:func:`stsreg.experiments.baselines.fit.fit`.

Embeddings: trained from scratch over the vocabulary of the project's training sentences (index 0 padding, 1
unknown), or the pretrained GloVe table, frozen and whole (every GloVe word, so test words outside the training
text still get their vector; InferSent keeps GloVe fixed too).

InferSent (Conneau et al., 2017) first learns on NLI: ``[u, v, |u-v|, u*v]`` -> MLP -> 3 classes, cross-entropy on
the labels 0/1/2 (:func:`pretrain_on_nli`), then the encoder is fine-tuned on STS-B like the others.
"""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path

import pandas as pd
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from stsreg.experiments.baselines.fit import FitConfig
from stsreg.product.optim import optimizer_step
from stsreg.product.training.checkpoint import Checkpoint, CheckpointPlan
from stsreg.product.training.resumable import Batches, run_steps
from stsreg.experiments.baselines.scoring import BiEncoder
from stsreg.experiments.baselines.wordvec import WordVectors, tokenize

log = logging.getLogger(__name__)

PAD, UNK = 0, 1
CELLS = {"rnn": nn.RNN, "lstm": nn.LSTM, "gru": nn.GRU}


def build_vocab(sentences: list[list[str]], min_count: int = 1) -> list[str]:
    """``["<pad>", "<unk>", words by frequency...]`` of the tokenized training sentences."""
    counts = Counter(w for s in sentences for w in s)
    return ["<pad>", "<unk>"] + [w for w, c in counts.most_common() if c >= min_count]


class RecurrentEncoder(BiEncoder):
    """Embedding -> RNN / LSTM / GRU -> (batch, hidden * directions) sentence embeddings."""

    def __init__(self, cell: str, hidden: int, *, vocab: list[str] | None = None, dim: int = 100,
                 glove: WordVectors | None = None, bidirectional: bool = False, pooling: str = "last"):
        super().__init__()
        if (vocab is None) == (glove is None):
            raise ValueError("give either a vocabulary (embeddings from scratch) or GloVe vectors (frozen)")
        if pooling not in ("last", "max"):
            raise ValueError(f"pooling must be 'last' or 'max', got {pooling!r}")
        if glove is not None:  # rows 0 / 1: padding and unknown words (zero vectors), then every GloVe word
            self.words = ["<pad>", "<unk>"] + glove.words
            table = torch.cat([torch.zeros(2, glove.dim), torch.from_numpy(glove.vectors)])
            self.embedding = nn.Embedding.from_pretrained(table, freeze=True, padding_idx=PAD)
            self.runs_on = f"{glove.source}, frozen"
        else:
            self.words = list(vocab)
            self.embedding = nn.Embedding(len(vocab), dim, padding_idx=PAD)
            self.runs_on = "from scratch"
        self.index = {w: i for i, w in enumerate(self.words)}
        self.rnn = CELLS[cell](self.embedding.embedding_dim, hidden, batch_first=True, bidirectional=bidirectional)
        self.pooling = pooling

    def ids(self, sentences: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """(batch, longest) token ids (0-padded) and (batch,) lengths (at least 1: an empty sentence reads <unk>)."""
        rows = [[self.index.get(w, UNK) for w in tokenize(s)] or [UNK] for s in sentences]
        lengths = torch.tensor([len(r) for r in rows])
        out = torch.full((len(rows), int(lengths.max())), PAD, dtype=torch.long)
        for k, r in enumerate(rows):
            out[k, :len(r)] = torch.tensor(r)
        return out, lengths

    def encode(self, sentences: list[str]) -> torch.Tensor:
        ids, lengths = self.ids(sentences)
        packed = pack_padded_sequence(self.embedding(ids.to(self.device)), lengths, batch_first=True,
                                      enforce_sorted=False)
        outputs, state = self.rnn(packed)
        if self.pooling == "last":
            h = state[0] if isinstance(state, tuple) else state  # (layers * directions, batch, hidden)
            return torch.cat(list(h[-(2 if self.rnn.bidirectional else 1):]), dim=-1)
        padded, _ = pad_packed_sequence(outputs, batch_first=True, padding_value=float("-inf"))
        return padded.max(dim=1).values

    @property
    def device(self) -> torch.device:
        return self.embedding.weight.device


class NliClassifier(nn.Module):
    """InferSent's NLI classifier: ``[u, v, |u-v|, u*v]`` (batch, 4e) -> MLP -> (batch, 3) logits."""

    def __init__(self, dim: int, hidden: int = 512):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(4 * dim, hidden), nn.Tanh(), nn.Linear(hidden, 3))

    def forward(self, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return self.mlp(torch.cat([u, v, (u - v).abs(), u * v], dim=-1))


def pretrain_on_nli(encoder: RecurrentEncoder, nli: pd.DataFrame, cfg: FitConfig, seed: int, ckpt_path: Path,
                    log_metric=lambda key, value, step: None) -> dict:
    """Train ``encoder`` (in place) with the NLI classifier on (premise, hypothesis, label 0/1/2); Adam at ``cfg.lr``
    (no schedule, no decay), cross-entropy, gradients clipped at ``cfg.max_grad_norm``, ``cfg.epochs`` of
    ``cfg.batch_size`` pairs.

    Resumable (:func:`stsreg.product.training.resumable.run_steps`: a checkpoint every ``cfg.checkpoint_every`` steps).
    Returns a summary with the training accuracy of the last 10% of steps."""
    torch.manual_seed(seed)
    with torch.no_grad():
        dim = encoder.encode(["a"]).shape[-1]
    clf = NliClassifier(dim)
    params = [p for p in list(encoder.parameters()) + list(clf.parameters()) if p.requires_grad]
    opt = torch.optim.Adam(params, lr=cfg.lr)
    premise, hypothesis = nli.premise.tolist(), nli.hypothesis.tolist()
    labels = torch.tensor(nli.label.to_numpy(), dtype=torch.long)
    state: dict = {"step": 0, "correct": [], "losses": []}

    def take(idx: list[int], step: int) -> None:
        logits = clf(encoder.encode([premise[i] for i in idx]), encoder.encode([hypothesis[i] for i in idx]))
        loss = nn.functional.cross_entropy(logits, labels[idx])
        optimizer_step(loss, opt, params, cfg.max_grad_norm)
        state["correct"].append(float((logits.argmax(-1) == labels[idx]).float().mean()))
        state["losses"].append(loss.item())
        log_metric("nli_loss", state["losses"][-1], step)

    encoder.train()
    ckpt = Checkpoint(CheckpointPlan(ckpt_path, every_steps=cfg.checkpoint_every, what="infersent nli"),
                      {"encoder": encoder, "classifier": clf, "optimizer": opt}, state)
    ckpt.resume()
    steps = run_steps(Batches(len(nli), cfg.batch_size, cfg.epochs, seed), take, ckpt, "infersent nli")
    correct, losses = state["correct"], state["losses"]
    tail = max(1, len(correct) // 10)
    return {"nli_pairs": len(nli), "nli_steps": steps, "nli_train_accuracy_last_10pct": sum(correct[-tail:]) / tail,
            "nli_loss_last_10pct": sum(losses[-tail:]) / tail}

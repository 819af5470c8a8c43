"""STS scoring: Spearman (x100) of cosine(u, v) against gold scores, via scipy.

    >>> spearman_cosine(model, s1, s2, gold)   # e.g. STS-B dev -> 86.72 for all-MiniLM-L6-v2
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from scipy.stats import spearmanr


def cosine_scores(model, sentences1: list[str], sentences2: list[str], batch_size: int = 64,
                  show_progress: bool | None = None) -> np.ndarray:
    """(n,), (n,) sentences -> (n,) cosine similarities; each distinct sentence is encoded once."""
    unique = list(dict.fromkeys(list(sentences1) + list(sentences2)))
    pos = {s: i for i, s in enumerate(unique)}
    emb = model.encode(unique, batch_size=batch_size, show_progress=show_progress)
    u = emb[[pos[s] for s in sentences1]]
    v = emb[[pos[s] for s in sentences2]]
    return F.cosine_similarity(u, v).numpy()


def spearman_cosine(model, sentences1, sentences2, gold, batch_size: int = 64, show_progress: bool | None = None) -> float:
    """Spearman correlation x100 between cosine(u, v) and ``gold`` (any scale)."""
    with torch.no_grad():
        cos = cosine_scores(model, list(sentences1), list(sentences2), batch_size, show_progress)
    return float(spearmanr(cos, np.asarray(gold, dtype=float)).statistic * 100)

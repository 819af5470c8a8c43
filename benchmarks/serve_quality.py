"""What a served ``/v1/embeddings`` computes, beside how fast: measured on each embedding server of ``make
bench-serve`` after its load cells, with the same requests for all.

- ``spearman``: Spearman x100 of the cosines of the served vectors against the gold scores of the STS-B test pairs
  (both sentences of a pair in one request, as the load sends them): the same model served must score the same;
- ``batch_moved``: the largest change of a sentence's vector, as a share of its norm, between asking for it alone and
  inside one request of 63 other sentences (other lengths, other activation ranges): 0 where an answer does not
  depend on its company (the 1e-5 that ``stsreg serve`` holds on every backend ``auto`` may pick).
"""

from __future__ import annotations

import json
import urllib.request

import numpy as np

ALONE = 16
#: Pairs :func:`measure` needs: the batch check asks for 16 sentences alone and inside 48 others (64 sentences).
PAIRS_NEEDED = 32


def _embed(url: str, model: str, texts: list[str]) -> np.ndarray:
    body = json.dumps({"model": model, "input": texts}).encode()
    request = urllib.request.Request(url, body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as r:
        data = sorted(json.loads(r.read())["data"], key=lambda d: d["index"])
    return np.asarray([d["embedding"] for d in data], dtype=np.float64)


def measure(url: str, model: str, pairs: list[tuple[str, str]], gold: list[float]) -> dict:
    """``{"spearman", "batch_moved"}`` of the server at ``url`` (its ``/v1/embeddings``)."""
    from scipy.stats import spearmanr

    cosines = []
    for a, b in pairs:
        u, v = _embed(url, model, [a, b])
        cosines.append(float(u @ v / np.linalg.norm(u) / np.linalg.norm(v)))
    texts = [s for p in pairs[:PAIRS_NEEDED] for s in p]
    asked = texts[:ALONE]
    alone = np.stack([_embed(url, model, [s])[0] for s in asked])
    company = texts[ALONE:ALONE + 48][::-1]
    together = _embed(url, model, company[:24] + asked + company[24:])[24:24 + ALONE]
    moved = np.abs(alone - together).max(axis=1) / np.linalg.norm(alone, axis=1)
    return {"spearman": float(spearmanr(cosines, gold).statistic * 100), "batch_moved": float(moved.max()),
            "pairs": len(pairs)}

"""Retrieval cost: one query against many candidates with a cross-encoder, against a bi-encoder's index."""

from __future__ import annotations

import time

import numpy as np
import torch

from stsreg.product import precision as amp


def retrieval_cost(backbone: str, candidates: list[str], query: str, max_length: int = 128, batch_size: int = 64,
                   repeats: int = 5, precision: str = "fp32") -> dict[str, float]:
    """What a cross-encoder costs at retrieval time, against a bi-encoder on the same backbone: score one query
    against ``candidates`` (pairs/s). The bi-encoder embeds the candidates once (an index: ``index_seconds``), then
    each query is one encoding and a matrix-vector product (median of ``repeats``); the cross-encoder reads every
    (query, candidate) pair. Untrained heads: the cost is the architecture's, not the weights'. Both run in
    ``precision`` (auto | fp32 | bf16, resolved alike for both)."""
    from stsreg.experiments.baselines.encoders import CrossEncoder, TransformerBiEncoder, set_precision

    torch.manual_seed(0)
    bi = TransformerBiEncoder(backbone, "mean", max_length=max_length).eval()
    cross = CrossEncoder(backbone, "mlp", max_length).eval()
    for model in (bi, cross):
        set_precision(model, precision)
    n = len(candidates)
    t = time.perf_counter()
    index = torch.nn.functional.normalize(bi.embed_all(candidates, batch_size, desc="index"), dim=-1)
    index_s = time.perf_counter() - t
    times = []
    with torch.no_grad():
        for _ in range(repeats):
            t = time.perf_counter()
            with bi.autocast():
                q = torch.nn.functional.normalize(bi.encode([query]).float(), dim=-1)
            top = (index @ q[0]).topk(10)
            times.append(time.perf_counter() - t)
    query_s = float(np.median(times))
    t = time.perf_counter()
    cross.score([query] * n, candidates, batch_size, desc="cross-encoder")
    cross_s = time.perf_counter() - t
    del top
    return {"candidates": n, "bi_index_seconds": index_s, "bi_query_seconds": query_s, "bi_pairs_per_s": n / query_s,
            "bi_pairs_per_s_with_index": n / (index_s + query_s), "cross_seconds": cross_s,
            "cross_pairs_per_s": n / cross_s,
            "speedup_bi_over_cross": cross_s / query_s, "threads": torch.get_num_threads(),
            "precision": amp.describe(bi.amp_dtype)}

"""Stage 1: freeze the encoder, train only the ``Linear(3d, 1)`` head on NLI (labels 0/1/2); optionally first
train the whole encoder on NLI with one of the NLI table's objectives (:func:`train_encoder_step`).

With the encoder frozen the embeddings never change, so each distinct sentence is encoded once and the
embeddings are cached on disk under a key of (encoder weights, tokenizer settings, pooling, sentences).
Every epoch then trains the head on cached ``[u, v, |u-v|]`` features: stage 1 costs one encoder pass,
however many epochs it runs, and nothing when the cache is warm.

    stsreg train --stage 1      # data/prepared/nli_train.parquet -> models/stage1
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import asdict
from pathlib import Path

import pandas as pd
import torch
from safetensors.torch import load_file, save_file

from stsreg.product import precision
from stsreg.infra.config import Stage1EncoderParams, Stage1Params
from stsreg.product.data.catalogue import sample_pairs, unique_sentences
from stsreg.infra.hashing import sha256_lines
from stsreg.product.losses import head_loss
from stsreg.product.model import SiameseRegressor, weights_fingerprint
from stsreg.product.training.checkpoint import CheckpointPlan
from stsreg.product.training.nli import KINDS, train_encoder, training_examples
from stsreg.infra import progress

log = logging.getLogger(__name__)


def encoder_fingerprint(model: SiameseRegressor) -> str:
    """sha256 over the encoder's weights (names, shapes, bytes) and the encoding settings."""
    h = hashlib.sha256(weights_fingerprint(model.encoder).encode())
    h.update(f"{model.config.pooling}|{model.config.max_length}|{type(model.tokenizer).__name__}|{len(model.tokenizer)}".encode())
    if model.amp_dtype is not None:  # bf16 embeddings differ from fp32 ones (fp32 keys are unchanged)
        h.update(f"|{precision.describe(model.amp_dtype)}".encode())
    return h.hexdigest()


def cached_embeddings(model: SiameseRegressor, sentences: list[str], cache_dir: Path,
                      batch_size: int) -> tuple[torch.Tensor, bool]:
    """(n,) distinct sentences -> ((n, d) embeddings, cache_hit). Writes the cache atomically."""
    key = hashlib.sha256((encoder_fingerprint(model) + sha256_lines(sentences)).encode()).hexdigest()[:32]
    path = cache_dir / f"{key}.safetensors"
    if path.exists():
        return load_file(str(path))["embeddings"], True
    emb = model.encode(sentences, batch_size=batch_size)
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    save_file({"embeddings": emb.contiguous()}, str(tmp))
    tmp.replace(path)
    return emb, False


def train_encoder_step(model: SiameseRegressor, nli: pd.DataFrame, p: Stage1EncoderParams, seed: int,
                       plan: CheckpointPlan, log_metric=lambda key, value, step: None) -> dict | None:
    """Train the whole encoder (in place) on NLI with ``p.objective``
    (:func:`stsreg.product.training.nli.train_encoder`, resumable from ``plan``'s checkpoint, deleted when done); None
    and no change for ``none``. Its per-step loss is logged as ``encoder_train_loss``. The head is left trainable for
    :func:`train_head`."""
    if p.objective == "none":
        return None
    examples = training_examples(nli, KINDS[p.objective], p.max_pairs, seed)
    summary = train_encoder(model, p.objective, examples, p, seed, plan,
                            lambda key, value, step: log_metric(f"encoder_{key}", value, step))
    Path(plan.path).unlink(missing_ok=True)
    model.head.requires_grad_(True)
    return summary


def train_head(model: SiameseRegressor, nli: pd.DataFrame, p: Stage1Params, seed: int, cache_dir: Path,
               log_metric=lambda key, value, step: None) -> dict:
    """Train ``model.head`` on NLI pairs (premise, hypothesis, label 0/1/2; ``p.max_pairs`` sampled with ``seed``).

    Returns a summary dict (pairs, steps, final loss, rounded accuracy of the head, the resolved ``config``): what
    the inputs decide. Whether the embeddings came from the cache is a fact of this run, not of the model: it is
    logged as the metric ``embedding_cache_hit`` (1.0 / 0.0), not written into the summary."""
    nli = sample_pairs(nli, p.max_pairs, seed)
    unique, (i1, i2) = unique_sentences(nli.premise, nli.hypothesis)
    emb, hit = cached_embeddings(model, unique, cache_dir, p.encode_batch_size)
    log_metric("embedding_cache_hit", float(hit), 0)
    u, v = emb[i1], emb[i2]
    labels = torch.tensor(nli.label.to_numpy(), dtype=torch.float32)

    model.encoder.requires_grad_(False)
    head = model.head
    loss_fn = head_loss(p.loss, p.x0, p.k, p.zero_negative)
    opt = torch.optim.AdamW(head.parameters(), lr=p.lr)
    gen = torch.Generator().manual_seed(seed)
    step, last = 0, float("nan")
    for epoch in range(p.epochs):
        order = torch.randperm(len(labels), generator=gen)
        bar = progress.bar(range(0, len(order), p.batch_size), desc=f"stage1 head, epoch {epoch + 1}/{p.epochs}",
                           unit="batch")
        for start in bar:
            idx = order[start:start + p.batch_size]
            loss = loss_fn(model.score_embeddings(u[idx], v[idx]), labels[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            last = loss.item()
            log_metric("train_loss", last, step)
    with torch.no_grad():
        pred = model.score_embeddings(u, v)
        acc = (pred.round().clamp(0, 2) == labels).float().mean().item()
    return {"pairs": len(nli), "distinct_sentences": len(unique), "steps": step,
            "final_loss": last, "head_rounded_accuracy": acc, "config": asdict(p)}

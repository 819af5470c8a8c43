"""Stage 2: unfreeze everything and fine-tune on STS pairs with a head loss (Smooth K2 by default).

AdamW (no decay on bias/LayerNorm) with layer-wise lr decay, linear warm-up schedule, gradient clipping,
STS-B dev Spearman every ``eval_every`` steps, the best checkpoint kept. A resumable checkpoint (weights,
optimizer, scheduler, RNG states, data position) is written atomically every ``checkpoint_every`` steps;
rerunning after a crash (even ``kill -9``) resumes and ends with the same weights as an uninterrupted run.
The pairs are tokenized once (batches are padded from the ids); the encoder runs under the model's
``precision`` (bf16 autocast where it resolves to it, :mod:`stsreg.precision`), the loss in fp32.

Runs unchanged under ``torchrun --nproc_per_node=N`` (DDP; gloo on CPU, nccl on GPU): the global batch is
``batch_size``, split evenly over processes by a ``DistributedSampler``; rank 0 evaluates, checkpoints, logs.

    stsreg train --stage 2                          # models/stage1 -> models/stage2
    torchrun --nproc_per_node=2 -m stsreg.cli train --stage 2
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import random
import shutil
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data.distributed import DistributedSampler
from tqdm.auto import tqdm

from stsreg import atomic, precision
from stsreg.config import Stage2Params
from stsreg.errors import InputError
from stsreg.evaluate import spearman_cosine
from stsreg.losses import Objective
from stsreg.model import SiameseRegressor, weights_fingerprint
from stsreg.optim import build_optimizer

log = logging.getLogger(__name__)


def set_seed(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def world() -> tuple[int, int]:
    """(world_size, rank) from torchrun's environment; (1, 0) when run plainly."""
    return int(os.environ.get("WORLD_SIZE", "1")), int(os.environ.get("RANK", "0"))


def init_distributed(device: torch.device) -> None:
    """Join the process group torchrun set up (nccl on CUDA, gloo on CPU); no-op for a single process."""
    if world()[0] > 1 and not dist.is_initialized():
        dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")


def _barrier() -> None:
    if dist.is_initialized():
        dist.barrier()


def resolve_device(name: str = "auto") -> torch.device:
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        return torch.device("cpu")
    return torch.device(name)


def _fingerprint(*parts) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _rng_state() -> dict:
    return {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state(),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []}


def _set_rng_state(s: dict) -> None:
    random.setstate(s["python"])
    np.random.set_state(s["numpy"])
    torch.set_rng_state(s["torch"])
    if s["cuda"]:
        torch.cuda.set_rng_state_all(s["cuda"])


def _rank(score: float) -> float:
    """Dev Spearman for comparisons: a collapsed model (constant cosines) has none (nan) and ranks last."""
    return -math.inf if math.isnan(score) else score


def _atomic_save_model(model: SiameseRegressor, dest: Path) -> None:
    with atomic.staged_dir(dest) as staged:
        model.save(staged)


def pair_lengths(ids_a: dict, ids_b: dict) -> list[int]:
    """Tokens of the longer sentence of each pair (:meth:`SiameseRegressor.pretokenize` output of both sides):
    what a batch pads to."""
    return [max(len(a), len(b)) for a, b in zip(ids_a["input_ids"], ids_b["input_ids"])]


def length_grouped(order: list[int], lengths: list[int], batch_size: int, seed: int, window: int = 50) -> list[list[int]]:
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


def fine_tune(model: SiameseRegressor, train: pd.DataFrame, dev: pd.DataFrame, p: Stage2Params, seed: int,
              out_dir: Path, ckpt_dir: Path, device: torch.device | None = None,
              log_metric=lambda key, value, step: None, keep: str | None = None, on_eval=None) -> dict:
    """Fine-tune on ``train`` (sentence1, sentence2, score on the data's scale: STS-B 0-5, SICK-R 1-5).

    Writes a model selected by STS-B dev Spearman of cosine to ``out_dir``: ``keep="best"`` (production's guard)
    the best of every evaluation *including step 0*, so it never hands on a model worse than its start;
    ``keep="trained"`` (the authors' selection, used by the comparison) the best evaluation *after* step 0, i.e.
    what the method trained. Returns a summary with the dev curve and both selections
    (``best_*`` and ``trained_best_*``). Resumes from ``ckpt_dir/last.pt`` when it belongs to the same
    configuration and data. ``keep`` defaults to ``p.keep``. ``on_eval(step, dev_spearman)`` is called after each
    dev evaluation on rank 0 (the search's pruner raises from it to stop a trial).
    """
    keep = keep or p.keep
    if keep not in ("best", "trained"):
        raise ValueError(f"keep must be 'best' or 'trained', got {keep!r}")
    device = device or resolve_device()
    world_size, rank = world()
    if p.batch_size % world_size:
        raise InputError(f"stage2.batch_size={p.batch_size} must be divisible by the {world_size} processes")
    per_rank = p.batch_size // world_size
    set_seed(seed)
    objective = Objective(p.loss, p.x0, p.k, p.zero_negative, p.temperature, p.contrastive_min_label, p.cos_a, p.cos_b,
                          p.joint_lambda)
    # what the saved model serves as its 0-5 score: the head, or the cosine map this objective trains
    model.config.score_map = objective.score_map
    if objective.kind == "contrastive":  # positives only; the rest of the batch serves as negatives
        train = train[train.score >= objective.min_label].reset_index(drop=True)

    s1, s2 = train.sentence1.tolist(), train.sentence2.tolist()
    y = torch.tensor(train.score.to_numpy(), dtype=torch.float32)
    y = adjust_labels(y, p.labels)
    # tokenized once: every epoch (and a resumed run) pads batches from these ids
    ids_a, ids_b = model.pretokenize(s1), model.pretokenize(s2)
    lengths = pair_lengths(ids_a, ids_b) if p.group_by_length else None
    sampler = DistributedSampler(range(len(y)), num_replicas=world_size, rank=rank, shuffle=True, seed=seed)
    steps_per_epoch = math.ceil(len(sampler) / per_rank)
    total_steps = steps_per_epoch * p.epochs

    model.to(device)
    amp_dtype = model.amp_dtype  # resolved (and, for auto, probed) before training touches the weights
    model.encoder.requires_grad_(True)
    for name, param in model.encoder.named_parameters():
        if name.startswith("pooler."):  # BERT-style pooler: unused by mean/CLS-hidden pooling; DDP wants no idle params
            param.requires_grad_(False)
    # the head is unused by the cosine-only objectives (and DDP wants no idle params)
    model.head.requires_grad_(objective.kind in ("head", "joint"))
    model.train()
    runner = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None) if world_size > 1 else model
    opt, sched = build_optimizer(model, p.lr, p.weight_decay, p.layer_decay, total_steps, p.warmup_ratio)

    # a checkpoint is resumed only by the same config, seed, process count, starting weights and data
    fingerprint = _fingerprint(asdict(p), seed, world_size, precision.describe(amp_dtype), weights_fingerprint(model),
                               hashlib.sha256("\n".join(s1 + s2).encode()).hexdigest(), y.tolist(), len(dev))
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    last, best_dir, trained_dir = ckpt_dir / "last.pt", ckpt_dir / "best", ckpt_dir / "best_trained"
    state = {"step": 0, "best": -math.inf, "best_step": -1, "trained_best": -math.inf, "trained_best_step": -1, "curve": []}
    if last.exists():
        ckpt = torch.load(last, map_location="cpu", weights_only=False)
        if ckpt["fingerprint"] == fingerprint:
            model.load_state_dict(ckpt["model"])
            opt.load_state_dict(ckpt["optimizer"])
            sched.load_state_dict(ckpt["scheduler"])
            _set_rng_state(ckpt["rng"][rank] if isinstance(ckpt["rng"], list) else ckpt["rng"])
            state = ckpt["state"]
            log.info("resuming stage 2 from step %d of %d (%s)", state["step"], total_steps, last)
        else:
            log.info("ignoring checkpoint %s: it belongs to another configuration or data", last)

    def evaluate(step: int) -> float:
        score = spearman_cosine(model, dev.sentence1, dev.sentence2, dev.score, p.eval_batch_size, show_progress=False)
        state["curve"].append([step, score])
        log_metric("dev_spearman", score, step)
        if on_eval is not None:
            on_eval(step, score)
        if _rank(score) > _rank(state["best"]) or state["best_step"] < 0:
            state["best"], state["best_step"] = score, step
            if keep == "best":
                _atomic_save_model(model, best_dir)
        # step 0 is the starting point, not something trained; the first evaluation after it is always a candidate
        if step > 0 and (_rank(score) > _rank(state["trained_best"]) or state["trained_best_step"] < 0):
            state["trained_best"], state["trained_best_step"] = score, step
            if keep == "trained":
                _atomic_save_model(model, trained_dir)
        return score

    def checkpoint() -> None:
        rngs = [None] * world_size
        if world_size > 1:
            dist.all_gather_object(rngs, _rng_state())
        else:
            rngs = [_rng_state()]
        if rank == 0:
            tmp = last.with_suffix(".tmp")
            torch.save({"fingerprint": fingerprint, "model": model.state_dict(), "optimizer": opt.state_dict(),
                        "scheduler": sched.state_dict(), "rng": rngs, "state": state}, tmp)
            os.replace(tmp, last)

    if state["step"] == 0 and rank == 0:
        evaluate(0)  # the starting point (stage 1 output), also the "before" figure
    _barrier()
    step = state["step"]
    bar = tqdm(total=total_steps, initial=step, desc="stage2", unit="step", disable=None if rank == 0 else True)
    for epoch in range(step // steps_per_epoch, p.epochs):
        sampler.set_epoch(epoch)
        order = list(sampler)
        batches = [order[i:i + per_rank] for i in range(0, len(order), per_rank)]
        if p.group_by_length:
            batches = length_grouped(order, lengths, per_rank, seed + epoch)
        for b in range(step - epoch * steps_per_epoch, len(batches)):
            idx = batches[b]
            with precision.autocast(amp_dtype, device):  # the encoder in bf16 where resolved; the loss in fp32
                u, v, score = runner(model.collate(ids_a, idx), model.collate(ids_b, idx))
            loss = objective(u.float(), v.float(), score.float(), y[idx].to(device))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), p.max_grad_norm)
            opt.step()
            sched.step()
            step += 1
            state["step"] = step
            bar.update(1)
            if rank == 0:
                log_metric("train_loss", loss.item(), step)
                log_metric("lr", sched.get_last_lr()[-1], step)
            epoch_end = b == len(batches) - 1
            if (step % p.eval_every == 0 or epoch_end) and rank == 0:
                bar.set_postfix(dev=f"{evaluate(step):.2f}")
            if step % p.checkpoint_every == 0 or epoch_end:
                checkpoint()
            _barrier()
    bar.close()
    # only rank 0 evaluates: the other DDP ranks have no dev curve
    summary = {"steps": step, "total_steps": total_steps, "start_dev_spearman": state["curve"][0][1] if state["curve"] else None,
               "best_dev_spearman": state["best"], "best_step": state["best_step"],
               "trained_best_dev_spearman": state["trained_best"], "trained_best_step": state["trained_best_step"],
               "kept": keep, "dev_curve": state["curve"], "world_size": world_size,
               "precision": precision.describe(amp_dtype)}
    if rank == 0:
        with atomic.staged_dir(out_dir) as staged:  # swapped in whole: never a half-copied model
            shutil.copytree(best_dir if keep == "best" else trained_dir, staged, dirs_exist_ok=True)
            (staged / "training_summary.json").write_text(json.dumps(summary, indent=2))
    _barrier()
    return summary

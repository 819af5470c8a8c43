"""One training loop for every trained baseline: MSE between the system's score and the STS label / 5.

Train pairs: STS-B train (labels 0-5, divided by 5: the 0-1 target the study uses for every system). The dev
evaluation (Spearman x100 of the score on STS-B dev, and the dev MSE on the 0-1 scale: the study's "validation
loss") runs every ``eval_every`` steps and at the end of each epoch; the weights of the best dev Spearman are the
ones kept, among the evaluations after step 0 (selection reads STS-B dev only). AdamW
(:func:`stsreg.product.optim.build_optimizer`: no decay on biases and norm weights, fused where the device has it),
linear warm-up then decay (transformers' schedule), gradient clipping. The forward pass runs under the model's autocast
(bf16 where ``model.precision`` resolves to it for a transformer system), the loss in fp32. ``group_by_length`` batches
pairs of similar length (:func:`stsreg.product.training.batches.length_grouped`, by :meth:`PairScorer.pair_lengths`):
the same pairs per epoch, less padding.

Resumable (:func:`resumable_steps`, the loop every baseline trains with): every ``checkpoint_every`` steps the
weights, optimizer, schedule, RNG state, step, the dev history and the best weights so far go to ``ckpt_path``
(atomically); a rerun with the checkpoint continues from it and ends with the same weights.
"""

from __future__ import annotations

import copy
import logging
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from stsreg.experiments.baselines.scoring import PairScorer
from stsreg.product.optim import build_optimizer
from stsreg.product.sts_eval import spearman
from stsreg.product.training.batches import epoch_batches

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class FitConfig:
    epochs: int = 1
    batch_size: int = 32
    lr: float = 2e-5
    weight_decay: float = 0.01
    warmup_ratio: float = 0.1
    max_grad_norm: float = 1.0
    eval_every: int = 0          # 0: only at each epoch end
    checkpoint_every: int = 50
    eval_batch_size: int = 64
    group_by_length: bool = False  # batches of similar-length pairs (transformer systems: measured equal quality)


def dev_metrics(model: PairScorer, dev: pd.DataFrame, batch_size: int) -> tuple[float, float]:
    """(Spearman x100 of the score, MSE of the score against label / 5) on the dev pairs."""
    pred = model.score(dev.sentence1.tolist(), dev.sentence2.tolist(), batch_size, desc="dev")
    gold = dev.score.to_numpy(dtype=float)
    return spearman(gold, pred), float(np.mean((pred - gold / 5.0) ** 2))


@dataclass(frozen=True)
class Batches:
    """Which examples each step takes: ``epochs`` passes over ``n`` examples in batches of ``batch_size``, each
    epoch's order drawn from a generator seeded with ``seed + epoch`` (so it does not depend on where a run was
    resumed); with ``lengths`` ((n,) padded length of each example) length-grouped
    (:func:`stsreg.product.training.batches.length_grouped`: the same number of batches, of similar-length examples)."""

    n: int
    batch_size: int
    epochs: int
    seed: int
    lengths: list[int] | None = None

    @property
    def per_epoch(self) -> int:
        return math.ceil(self.n / self.batch_size)

    def of_epoch(self, epoch: int) -> list[list[int]]:
        order = torch.randperm(self.n, generator=torch.Generator().manual_seed(self.seed + epoch)).tolist()
        return epoch_batches(order, self.batch_size, self.lengths, self.seed + epoch)


@dataclass(frozen=True)
class Saved:
    """What a run's checkpoint holds and where: every ``every`` steps and at the end, the state dicts of ``state``
    (name -> module, optimizer or scheduler), the mutable ``extra`` dict (histories; ``extra["losses"]`` collects the
    step losses), the torch RNG state and the step go to ``path`` (atomically)."""

    path: Path
    every: int
    state: dict
    extra: dict


def resumable_steps(batches: Batches, step_fn: Callable[[list[int]], float], saved: Saved, desc: str,
                    after_step: Callable[[int], None] = lambda step: None,
                    log_metric=lambda key, value, step: None, loss_name: str = "train_loss") -> int:
    """Run ``batches``: ``step_fn(indices) -> loss`` takes one optimizer step; ``after_step(step)`` runs after each
    (e.g. a dev evaluation). Returns the number of steps.

    Resumable: a call with ``saved``'s checkpoint present restores everything it holds and continues, so a killed
    run ends with the same weights."""
    steps_per_epoch, extra = batches.per_epoch, saved.extra
    total, step = steps_per_epoch * batches.epochs, 0
    extra.setdefault("losses", [])
    if saved.path.exists():
        ck = torch.load(saved.path, map_location="cpu", weights_only=False)
        for name, obj in saved.state.items():
            obj.load_state_dict(ck[name])
        extra.update(ck["extra"])
        torch.set_rng_state(ck["rng"])
        step = ck["step"]
        log.info("%s: resuming from step %d of %d", desc, step, total)
    saved.path.parent.mkdir(parents=True, exist_ok=True)
    bar = tqdm(total=total, initial=step, desc=desc, unit="step", disable=None)
    for epoch in range(step // steps_per_epoch, batches.epochs):
        order = batches.of_epoch(epoch)
        for b in range(step - epoch * steps_per_epoch, steps_per_epoch):
            extra["losses"].append(step_fn(order[b]))
            step += 1
            log_metric(loss_name, extra["losses"][-1], step)
            bar.update(1)
            after_step(step)
            if step % saved.every == 0 or step == total:
                tmp = saved.path.with_suffix(".tmp")
                torch.save({**{name: obj.state_dict() for name, obj in saved.state.items()}, "extra": extra,
                            "rng": torch.get_rng_state(), "step": step}, tmp)
                os.replace(tmp, saved.path)
    bar.close()
    return step


def fit(model: PairScorer, train: pd.DataFrame, dev: pd.DataFrame, cfg: FitConfig, seed: int, ckpt_path: Path,
        log_metric=lambda key, value, step: None) -> dict:
    """Train ``model`` in place on ``train`` (sentence1, sentence2, score 0-5), keep the best-dev weights; returns a
    summary (dev Spearman at the start and of the kept weights, the step it came from, the dev history)."""
    torch.manual_seed(seed)
    params = [p for p in model.parameters() if p.requires_grad]
    steps_per_epoch = math.ceil(len(train) / cfg.batch_size)
    total = steps_per_epoch * cfg.epochs
    opt, sched = build_optimizer(model, cfg.lr, cfg.weight_decay, 1.0, total, cfg.warmup_ratio)
    s1, s2 = train.sentence1.tolist(), train.sentence2.tolist()
    lengths = model.pair_lengths(s1, s2) if cfg.group_by_length else None
    target = torch.tensor(train.score.to_numpy(dtype=np.float32) / 5.0)
    # history: every dev evaluation; best / best_state: the best one after step 0 and its weights
    extra: dict = {"history": [], "best": None, "best_state": None}

    def evaluate(step: int) -> None:
        rho, mse = dev_metrics(model, dev, cfg.eval_batch_size)
        extra["history"].append({"step": step, "dev_spearman": rho, "dev_mse": mse})
        log_metric("dev_spearman", rho, step)
        log_metric("dev_mse", mse, step)
        # the kept weights: the best evaluation after step 0 (what the system trained, as compare chooses its rows)
        if step > 0 and (extra["best"] is None or rho > extra["best"]["dev_spearman"]):
            extra["best"] = extra["history"][-1]
            extra["best_state"] = copy.deepcopy({k: v.detach().cpu() for k, v in model.state_dict().items()})

    def step_fn(idx: list[int]) -> float:
        with model.autocast():
            pred = model([s1[i] for i in idx], [s2[i] for i in idx])
        loss = torch.nn.functional.mse_loss(pred.float(), target[idx].to(pred.device))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, cfg.max_grad_norm)
        opt.step()
        sched.step()
        return loss.item()

    def after_step(step: int) -> None:
        if (cfg.eval_every and step % cfg.eval_every == 0) or step % steps_per_epoch == 0:
            evaluate(step)
            model.train()

    state = {"model": model, "optimizer": opt, "scheduler": sched}
    if not ckpt_path.exists():
        evaluate(0)  # the start (reported; a trained system keeps the best evaluation after it)
    model.train()
    step = resumable_steps(Batches(len(train), cfg.batch_size, cfg.epochs, seed, lengths), step_fn,
                           Saved(ckpt_path, cfg.checkpoint_every, state, extra), type(model).__name__, after_step,
                           log_metric)
    history, losses = extra["history"], extra["losses"]
    start, kept = history[0], extra["best"] or history[0]
    if extra["best_state"] is not None:
        model.load_state_dict(extra["best_state"])
    model.eval()
    return {"steps": step, "total_steps": total, "epochs": cfg.epochs, "train_pairs": len(train),
            "start_dev_spearman": start["dev_spearman"], "kept_dev_spearman": kept["dev_spearman"],
            "kept_dev_mse": kept["dev_mse"], "kept_step": kept["step"], "history": history,
            "final_loss_mean_last_10pct": float(np.mean(losses[-max(1, len(losses) // 10):])) if losses else None}

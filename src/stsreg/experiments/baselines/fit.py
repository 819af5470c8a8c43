"""How every trained baseline trains: MSE between the system's score and the STS label / 5.

Train pairs: STS-B train (labels 0-5, divided by 5: the 0-1 target the study uses for every system). The dev
evaluation (Spearman x100 of the score on STS-B dev, and the dev MSE on the 0-1 scale: the study's "validation
loss") runs every ``eval_every`` steps and at the end of each epoch; the weights of the best dev Spearman are the
ones kept, among the evaluations after step 0 (selection reads STS-B dev only). AdamW
(:func:`stsreg.product.optim.build_optimizer`: no decay on biases and norm weights, fused where the device has it),
linear warm-up then decay (transformers' schedule), gradient clipping. The forward pass runs under the model's autocast
(bf16 where ``model.precision`` resolves to it for a transformer system), the loss in fp32. ``group_by_length`` batches
pairs of similar length (:func:`stsreg.product.training.batches.length_grouped`, by :meth:`PairScorer.pair_lengths`):
the same pairs per epoch, less padding.

Resumable (:func:`stsreg.product.training.resumable.run_steps`, the loop stage 2 and every baseline train with): every
``checkpoint_every`` steps and at each epoch end the weights, optimizer, schedule, RNG states, step, the dev history
and the best weights so far go to ``ckpt_path`` (atomically); a rerun with the checkpoint continues from it and ends
with the same weights.
"""

from __future__ import annotations

import copy
import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from stsreg.experiments.baselines.scoring import PairScorer
from stsreg.product.optim import build_optimizer, optimizer_step
from stsreg.product.sts_eval import spearman
from stsreg.product.training.checkpoint import Checkpoint, CheckpointPlan
from stsreg.product.training.resumable import Batches, run_steps

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


def fit(model: PairScorer, train: pd.DataFrame, dev: pd.DataFrame, cfg: FitConfig, seed: int, ckpt_path: Path,
        log_metric=lambda key, value, step: None) -> dict:
    """Train ``model`` in place on ``train`` (sentence1, sentence2, score 0-5), keep the best-dev weights; returns a
    summary (dev Spearman at the start and of the kept weights, the step it came from, the dev history)."""
    torch.manual_seed(seed)
    params = [p for p in model.parameters() if p.requires_grad]
    s1, s2 = train.sentence1.tolist(), train.sentence2.tolist()
    batches = Batches(len(train), cfg.batch_size, cfg.epochs, seed,
                      model.pair_lengths(s1, s2) if cfg.group_by_length else None)
    opt, sched = build_optimizer(model, cfg.lr, cfg.weight_decay, 1.0, batches.total, cfg.warmup_ratio)
    target = torch.tensor(train.score.to_numpy(dtype=np.float32) / 5.0)
    # history: every dev evaluation; best / best_state: the best one after step 0 and its weights
    state: dict = {"step": 0, "losses": [], "history": [], "best": None, "best_state": None}

    def evaluate(step: int) -> None:
        rho, mse = dev_metrics(model, dev, cfg.eval_batch_size)
        state["history"].append({"step": step, "dev_spearman": rho, "dev_mse": mse})
        log_metric("dev_spearman", rho, step)
        log_metric("dev_mse", mse, step)
        # the kept weights: the best evaluation after step 0 (what the system trained, as compare chooses its rows)
        if step > 0 and (state["best"] is None or rho > state["best"]["dev_spearman"]):
            state["best"] = state["history"][-1]
            state["best_state"] = copy.deepcopy({k: v.detach().cpu() for k, v in model.state_dict().items()})

    def take(idx: list[int], step: int) -> None:
        with model.autocast():
            pred = model([s1[i] for i in idx], [s2[i] for i in idx])
        loss = torch.nn.functional.mse_loss(pred.float(), target[idx].to(pred.device))
        optimizer_step(loss, opt, params, cfg.max_grad_norm, sched)
        state["losses"].append(loss.item())
        log_metric("train_loss", state["losses"][-1], step)

    def after_step(step: int, epoch_end: bool) -> None:
        if (cfg.eval_every and step % cfg.eval_every == 0) or epoch_end:
            evaluate(step)
            model.train()

    ckpt = Checkpoint(CheckpointPlan(ckpt_path, every_steps=cfg.checkpoint_every, what=type(model).__name__),
                      {"model": model, "optimizer": opt, "scheduler": sched}, state)
    if not ckpt.resume():
        evaluate(0)  # the start (reported; a trained system keeps the best evaluation after it)
    model.train()
    step = run_steps(batches, take, ckpt, type(model).__name__, after_step)
    history, losses = state["history"], state["losses"]
    start, kept = history[0], state["best"] or history[0]
    if state["best_state"] is not None:
        model.load_state_dict(state["best_state"])
    model.eval()
    return {"steps": step, "total_steps": batches.total, "epochs": cfg.epochs, "train_pairs": len(train),
            "start_dev_spearman": start["dev_spearman"], "kept_dev_spearman": kept["dev_spearman"],
            "kept_dev_mse": kept["dev_mse"], "kept_step": kept["step"], "history": history,
            "final_loss_mean_last_10pct": float(np.mean(losses[-max(1, len(losses) // 10):])) if losses else None}

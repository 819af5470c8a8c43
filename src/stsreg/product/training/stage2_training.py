"""Stage 2: unfreeze everything and fine-tune on STS pairs with a stage-2 objective
(:class:`stsreg.product.objective.Objective`).

AdamW (no decay on bias/LayerNorm) with layer-wise lr decay, linear warm-up schedule, gradient clipping,
STS-B dev Spearman every ``eval_every`` steps (:class:`~stsreg.product.training.selection.DevSelector` keeps the
selected model). The steps are :func:`stsreg.product.training.resumable.run_steps`'; its checkpoint
(:class:`~stsreg.product.training.checkpoint.Checkpoint`) is written once ``checkpoint_every_s`` seconds passed since
the last, and at each epoch end; rerunning after a crash (even
``kill -9``) resumes and ends with the same weights as an uninterrupted run. The pairs are tokenized once (batches
are padded from the ids); the encoder runs under the model's ``precision`` (bf16 autocast where it resolves to it,
:mod:`stsreg.product.precision`), the loss in fp32.

Runs unchanged under ``torchrun --nproc_per_node=N`` (DDP; gloo on CPU, nccl on GPU): the global batch is
``batch_size``, split evenly over processes as a ``DistributedSampler`` splits it; rank 0 evaluates, checkpoints, logs.

    stsreg train --stage 2                          # models/stage1 -> models/stage2
    torchrun --nproc_per_node=2 -m stsreg.cli train --stage 2
"""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from torch.nn.parallel import DistributedDataParallel

from stsreg.infra import atomic, runtime
from stsreg.product import precision
from stsreg.infra.config import Stage2Params
from stsreg.infra.errors import InputError
from stsreg.infra.codehash import code_hash
from stsreg.infra.hashing import sha256_lines
from stsreg.product.objective import Objective
from stsreg.product.model import SiameseRegressor, weights_fingerprint
from stsreg.product.model_files import TRAIN_ROWS
from stsreg.product.optim import build_optimizer, optimizer_step
from stsreg.product.training.batches import adjust_labels, epoch_batches, pair_lengths
from stsreg.product.training.checkpoint import Checkpoint, CheckpointPlan
from stsreg.product.training.resumable import Batches, run_steps
from stsreg.product.training.selection import DevSelector

#: The modules whose code a stage-2 checkpoint is keyed with: this loop and everything it imports (the objective's
#: losses included, and the loop it steps with); params are keyed by value, so their module is left out.
LOOP_CODE = ("stsreg.product.training.stage2_training", "stsreg.product.objective",
             "stsreg.product.training.resumable", "stsreg.product.training.checkpoint")



def _prepare_model(model: SiameseRegressor, objective: Objective, device: torch.device, world_size: int):
    """Move to ``device``, unfreeze what the objective trains, set the served score; returns (the module to call:
    DDP-wrapped when distributed, the resolved autocast dtype)."""
    model.config.score_map = objective.score_map  # what the saved model serves as its 0-5 score (see Objective)
    model.to(device)
    amp_dtype = model.amp_dtype  # resolved (and, for auto, probed) before training touches the weights
    model.encoder.requires_grad_(True)
    for name, param in model.encoder.named_parameters():
        if name.startswith("pooler."):  # BERT-style pooler: unused by mean/CLS-hidden pooling; DDP wants no idle params
            param.requires_grad_(False)
    # the head is unused by the cosine-only objectives (and DDP wants no idle params)
    model.head.requires_grad_(objective.kind in ("head", "joint"))
    model.train()
    if world_size > 1:
        return DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None), amp_dtype
    return model, amp_dtype


@dataclass(frozen=True)
class TrainingRun:
    """What one stage-2 run trains with, fixed before its first step: the ``model`` (its weights) and the ``runner``
    called on a batch (the model, DDP-wrapped when distributed), the ``objective``, the optimizer ``opt`` and its
    schedule ``sched``, the autocast ``amp_dtype`` (None: fp32) on ``device``, the process count ``world_size``, the
    ``seed`` and the optimisation settings ``p``."""

    model: SiameseRegressor
    runner: torch.nn.Module
    objective: Objective
    opt: torch.optim.Optimizer
    sched: torch.optim.lr_scheduler.LRScheduler
    amp_dtype: torch.dtype | None
    device: torch.device
    world_size: int
    seed: int
    p: Stage2Params

    def config(self) -> dict:
        """The resolved configuration a checkpoint and the summary record."""
        return {"seed": self.seed, "stage2": asdict(self.p)}

    def key(self) -> dict:
        """What a checkpoint of this run is resumed by (with the data): config, seed, processes, precision, the
        starting weights and the loop's code."""
        return {"config": asdict(self.p), "seed": self.seed, "processes": self.world_size,
                "precision": precision.describe(self.amp_dtype), "weights": weights_fingerprint(self.model),
                "code": code_hash(LOOP_CODE)}


def _step(run: TrainingRun, batch_a: dict, batch_b: dict, y: torch.Tensor) -> torch.Tensor:
    """One optimizer step on a padded batch (``y``: (batch,) labels); returns the loss (a 0-d tensor)."""
    with precision.autocast(run.amp_dtype, run.device):  # the encoder in bf16 where resolved; the loss in fp32
        u, v, score = run.runner(batch_a, batch_b)
    loss = run.objective(u.float(), v.float(), score.float(), y)
    optimizer_step(loss, run.opt, run.model.parameters(), run.p.max_grad_norm, run.sched)
    return loss


#: Steps per point of the training-loss curve (the mean loss over each window of this many steps).
LOSS_WINDOW = 25


class LossCurve:
    """Mean training loss per :data:`LOSS_WINDOW` steps: ``points``, ``[step, mean]`` each.

    Losses are summed as tensors (no host sync per step); its state dict (read when a checkpoint is written) holds
    the open window, so a resumed run's curve is the uninterrupted run's curve."""

    def __init__(self, every: int = LOSS_WINDOW):
        self.every, self.points = every, []
        self.total, self.n = torch.zeros((), dtype=torch.float64), 0

    def add(self, loss: torch.Tensor, step: int) -> None:
        self.total = self.total.to(loss.device) + loss.detach().double()
        self.n += 1
        if step % self.every == 0:
            self.close(step)

    def close(self, step: int) -> None:
        """End the open window at ``step`` (a partial window at the end of training is a point too)."""
        if self.n:
            self.points.append([step, float(self.total) / self.n])
        self.total, self.n = torch.zeros((), dtype=torch.float64), 0

    def state_dict(self) -> dict:
        return {"points": self.points, "window": [float(self.total), self.n]}

    def load_state_dict(self, saved: dict) -> None:
        self.points, (total, self.n) = saved["points"], saved["window"]
        self.total = torch.tensor(total, dtype=torch.float64)


@dataclass(frozen=True)
class Stage2Job:
    """What one stage-2 training is asked for: the ``train`` pairs (sentence1, sentence2, score on the data's scale:
    STS-B 0-5, SICK-R 1-5) and the ``dev`` pairs it selects on (STS-B dev); where the selected model (``out_dir``) and
    the checkpoints (``ckpt_dir``) go; which selection ``out_dir`` keeps (``keep``: ``best`` or ``trained``, None:
    ``stage2.keep``; :mod:`stsreg.product.training.selection`); the ``device`` (None: this process's,
    :func:`stsreg.infra.runtime.resolve_device`); and, for the record, what the starting weights are (``started_from``,
    :mod:`stsreg.product.runners.warm_start`) and the hashes of the rows ``train`` was drawn from (``drawn_from``, kept
    as :data:`TRAIN_ROWS`)."""

    train: pd.DataFrame
    dev: pd.DataFrame
    out_dir: Path
    ckpt_dir: Path
    keep: str | None = None
    device: torch.device | None = None
    started_from: dict | None = None
    drawn_from: np.ndarray | None = None


def fine_tune(model: SiameseRegressor, job: Stage2Job, objective: Objective, p: Stage2Params, seed: int,
              log_metric=lambda key, value, step: None, on_eval=None) -> dict:
    """Fine-tune on ``job.train`` with ``objective``; ``p`` gives the optimisation (lr, epochs, batch, schedule,
    labels, evaluation, checkpoints). Writes the model selected on ``job.dev`` to ``job.out_dir``
    (:class:`Stage2Job`). Returns a summary: dev and loss curves, both selections (``best_*``, ``trained_best_*``),
    the resolved ``config`` and, when given, ``started_from``. Resumes from ``job.ckpt_dir/last.pt`` when it belongs
    to the same configuration and data. ``on_eval(step, dev_spearman)``: see :class:`DevSelector`."""
    train, dev, ckpt_dir = job.train, job.dev, job.ckpt_dir
    device = job.device or runtime.resolve_device()
    world_size, rank = runtime.world()
    per_rank = _per_rank(p.batch_size, world_size)  # refused before any tokenizing
    runtime.set_seed(seed)
    ids_a, ids_b, y, lengths, pairs_digest = _training_data(model, train, objective, p)
    batches = Batches(len(y), per_rank, p.epochs, seed, lengths, rank, world_size)
    runner, amp_dtype = _prepare_model(model, objective, device, world_size)
    opt, sched = build_optimizer(model, p.lr, p.weight_decay, p.layer_decay, batches.total, p.warmup_ratio)
    run = TrainingRun(model, runner, objective, opt, sched, amp_dtype, device, world_size, seed, p)
    losses = LossCurve()
    select = DevSelector(model, dev, p.eval_batch_size, job.keep or p.keep,
                         {"best": ckpt_dir / "best", "trained": ckpt_dir / "best_trained"}, log_metric, on_eval)
    # a checkpoint is resumed only by the same run on the same data
    plan = CheckpointPlan(ckpt_dir / "last.pt", {**run.key(), "data": [pairs_digest, y.tolist(), len(dev)]},
                          every_s=p.checkpoint_every_s, what="stage 2")
    ckpt = Checkpoint(plan, {"model": model, "optimizer": opt, "scheduler": sched, "loss_curve": losses,
                             "selection": select}, {"step": 0}, run.config())
    if ckpt.resume(rank) == 0 and rank == 0:
        select(0)  # the starting point (stage 1 output), also the "before" figure
    runtime.barrier()

    def take(idx: list[int], step: int) -> None:
        loss = _step(run, model.collate(ids_a, idx), model.collate(ids_b, idx), y[idx].to(device))
        losses.add(loss, step)
        if rank == 0:
            _log_step(log_metric, loss, sched, step)

    def evaluate(step: int, epoch_end: bool) -> dict | None:
        if (step % p.eval_every == 0 or epoch_end) and rank == 0:
            return {"dev": f"{select(step):.2f}", "best": f"{select.state['best']:.2f}"}
        return None

    step = run_steps(batches, take, ckpt, "stage2", evaluate)
    losses.close(step)
    summary = _summary(run, step, batches.total, select, losses, job.started_from)
    if rank == 0:
        _write_output(select.kept_dir, summary, job.out_dir, job.drawn_from)
    runtime.barrier()
    return summary


def _summary(run: TrainingRun, step: int, total_steps: int, select: DevSelector, losses: LossCurve,
             started_from: dict | None) -> dict:
    """The run's ``training_summary.json``: steps, both dev selections, the loss curve, processes, precision, the
    resolved config and, when given, what the starting weights were."""
    # only rank 0 evaluates: the other DDP ranks have no dev curve; the loss curve is rank 0's share of the batches
    summary = {"steps": step, "total_steps": total_steps, **select.summary(), "loss_curve": losses.points,
               "world_size": run.world_size, "precision": precision.describe(run.amp_dtype),
               "config": run.config()}
    return summary | ({"started_from": started_from} if started_from is not None else {})


def _log_step(log_metric, loss: torch.Tensor, sched, step: int) -> None:
    log_metric("train_loss", loss.detach(), step)  # a tensor: read when the buffer flushes, no sync here
    log_metric("lr", sched.get_last_lr()[-1], step)


def _per_rank(batch_size: int, world_size: int) -> int:
    """The batch of each DDP process (the global ``stage2.batch_size`` split evenly)."""
    if batch_size % world_size:
        raise InputError(f"stage2.batch_size={batch_size} must be divisible by the {world_size} processes")
    return batch_size // world_size


def _training_data(model: SiameseRegressor, train: pd.DataFrame, objective: Objective, p: Stage2Params):
    """The training pairs, tokenized once (every epoch pads batches from these ids): returns (ids of sentence1s,
    ids of sentence2s, (n,) float labels as the loss sees them with ``stage2.labels`` applied, pair lengths for
    length-grouped batches or None, a digest of the sentences). The contrastive objective keeps its positive pairs
    only (the rest of the batch serves as negatives)."""
    if objective.kind == "contrastive":
        train = train[train.score >= objective.min_label].reset_index(drop=True)
    y = adjust_labels(torch.tensor(train.score.to_numpy(), dtype=torch.float32), p.labels)
    s1, s2 = train.sentence1.tolist(), train.sentence2.tolist()
    ids_a, ids_b = model.pretokenize(s1), model.pretokenize(s2)
    return ids_a, ids_b, y, pair_lengths(ids_a, ids_b) if p.group_by_length else None, sha256_lines(s1 + s2)


def _write_output(kept_dir: Path, summary: dict, out_dir: Path, drawn_from: np.ndarray | None) -> None:
    """The kept model + ``training_summary.json`` (+ ``train_rows.npy``) -> ``out_dir``, swapped in whole (never a
    half-copied model)."""
    with atomic.staged_dir(out_dir) as staged:
        shutil.copytree(kept_dir, staged, dirs_exist_ok=True)
        (staged / "training_summary.json").write_text(json.dumps(summary, indent=2))
        if drawn_from is not None:  # a warm retrain from this model tells its old rows from new ones by these
            np.save(staged / TRAIN_ROWS, drawn_from)

"""Benchmark (b) of ``make bench``: steady-state stage-2 training pairs/s of stsreg against
sentence-transformers' ``SentenceTransformerTrainer`` with ``CoSENTLoss`` (same pairs, batch, max length, threads)."""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path

import pandas as pd

from benchmarks.bench_report import median, sync


def train_pairs(sts: pd.DataFrame, n: int, seed: int) -> pd.DataFrame:
    """``n`` STS-B + SICK-R training pairs drawn with ``seed`` (the same rows for both sides of the bench)."""
    from stsreg.product.data.catalogue import sample_pairs, sts_training_pairs

    return sample_pairs(sts_training_pairs(sts), n, seed)


def short_dev(sts: pd.DataFrame) -> pd.DataFrame:
    """16 STS-B dev rows: ``fine_tune`` needs a dev table, the bench never evaluates it (eval_every is huge)."""
    from stsreg.product.data.catalogue import stsb_split

    return stsb_split(sts, "dev").head(16)


def _steady_rate(stamps: list[float], batch_size: int, warmup: int) -> float:
    """Pairs/s between the end of step ``warmup`` and the last step (per-step callback timestamps)."""
    if len(stamps) <= warmup + 1:
        raise ValueError(f"need more than {warmup + 1} steps to time, got {len(stamps)}")
    return (len(stamps) - 1 - warmup) * batch_size / (stamps[-1] - stamps[warmup])


def resolved_precision(model) -> str:
    from stsreg.product import precision

    return precision.describe(model.amp_dtype)


def train_stsreg(backbone: str, pairs: pd.DataFrame, dev: pd.DataFrame, stage2, max_length: int, work: Path,
                  warmup: int, group_by_length: bool, precision: str, device: str) -> float:
    import torch

    from stsreg.product.model import SiameseRegressor
    from stsreg.product.objective import Objective
    from stsreg.product.training.stage2_training import Stage2Job, fine_tune

    stamps: list[float] = []
    model = SiameseRegressor.from_pretrained(backbone, max_length=max_length, precision=precision)
    p = dataclasses.replace(stage2, epochs=1, eval_every=10**9, checkpoint_every_s=1e9, group_by_length=group_by_length)
    job = Stage2Job(pairs, dev, work / "out", work / "ckpt", device=torch.device(device))
    fine_tune(model, job, Objective.from_params(p), p, 0,
              log_metric=lambda k, v, s: k == "train_loss" and stamps.append(sync(device)))
    return _steady_rate(stamps, p.batch_size, warmup)


def _train_st(backbone: str, pairs: pd.DataFrame, batch_size: int, max_length: int, work: Path, warmup: int,
              device: str) -> float:
    from datasets import Dataset
    from sentence_transformers import (
        SentenceTransformer,
        SentenceTransformerTrainer,
        SentenceTransformerTrainingArguments,
    )
    from sentence_transformers.losses import CoSENTLoss
    from transformers import TrainerCallback

    from stsreg.product.model import resolve_backbone

    stamps: list[float] = []

    class Stamp(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            stamps.append(sync(device))

    model = SentenceTransformer(resolve_backbone(backbone), device=device)
    model.max_seq_length = max_length
    # scale labels to 0-1 per dataset, as sentence-transformers users do (SICK-R is 1-5)
    data = Dataset.from_dict({"sentence1": list(pairs.sentence1), "sentence2": list(pairs.sentence2),
                              "score": list((pairs.score / 5.0).astype(float))})
    args = SentenceTransformerTrainingArguments(
        output_dir=str(work / "st"), per_device_train_batch_size=batch_size, num_train_epochs=1, learning_rate=2e-5,
        warmup_ratio=0.1, save_strategy="no", logging_strategy="no", report_to="none", disable_tqdm=True,
        use_cpu=device == "cpu",
        dataloader_num_workers=0, seed=0)
    trainer = SentenceTransformerTrainer(model=model, args=args, train_dataset=data, loss=CoSENTLoss(model),
                                         callbacks=[Stamp()])
    trainer.train()
    return _steady_rate(stamps, batch_size, warmup)


def bench_train(backbone: str, sts: pd.DataFrame, n_pairs: int, stage2, max_length: int, repeats: int,
                group_by_length: bool = False, precision: str = "auto", warmup: int = 5, device: str = "cpu") -> dict:
    """``stage2``: :class:`stsreg.infra.config.Stage2Params` (its loss and batch size; one epoch, no dev evaluation).
    Both sides train on ``device``; on CUDA each step's timestamp waits for the GPU (one sync per step, both sides)."""
    batch_size = stage2.batch_size
    pairs = train_pairs(sts, n_pairs, 0)
    dev = short_dev(sts)
    rates = {"stsreg": [], "sentence_transformers": []}
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as d:
            rates["stsreg"].append(train_stsreg(backbone, pairs, dev, stage2, max_length, Path(d), warmup,
                                                group_by_length,
                                                 precision, device))
        with tempfile.TemporaryDirectory() as d:
            rates["sentence_transformers"].append(_train_st(backbone, pairs, batch_size, max_length, Path(d), warmup,
                                                            device))
    return {"unit": "pairs/s", "samples": rates, "pairs": len(pairs), "batch_size": batch_size,
            "max_length": max_length,
            "group_by_length": group_by_length, "precision": precision, "loss": stage2.loss, "device": device,
            "timed_steps": len(pairs) // batch_size - 1 - warmup,
            "ratio": median(rates["stsreg"]) / median(rates["sentence_transformers"])}

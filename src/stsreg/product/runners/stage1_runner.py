"""Stage 1's runner: NLI training table -> ``models/stage1`` (frozen encoder + trained head)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pandas as pd

from stsreg.infra import atomic, runtime
from stsreg.infra.config import Params
from stsreg.infra.codehash import code_hash
from stsreg.product.model import SiameseRegressor
from stsreg.product.runners import NOOP
from stsreg.infra.hashing import sha256_file
from stsreg.product.training.checkpoint import CheckpointPlan
from stsreg.product.training.stage1_training import train_encoder_step, train_head


#: The code an encoder-step checkpoint is keyed with: the NLI training loop and what it imports.
ENCODER_CODE = ("stsreg.product.training.stage1_training", "stsreg.product.training.nli",
                "stsreg.product.training.resumable", "stsreg.product.training.checkpoint")


def run_stage1(params: Params, nli_path: Path, out_dir: Path, cache_dir: Path, log_metric=NOOP,
               ckpt_dir: Path = Path("checkpoints/stage1")) -> dict:
    """NLI training table -> ``out_dir`` (encoder, trained on NLI first when ``stage1.encoder.objective`` is set,
    then frozen + trained head, ``training_summary.json``). The encoder step resumes from its checkpoint in
    ``ckpt_dir`` when that was made with the same settings, model settings, seed, NLI table and code."""
    runtime.set_seed(params.seed)
    model = SiameseRegressor.from_params(params.model)
    model.token_cache = runtime.cache_dir("tokens")
    nli = pd.read_parquet(nli_path)
    p = params.stage1
    plan = CheckpointPlan(ckpt_dir / "encoder.pt", {
        "settings": [dataclasses.asdict(p.encoder), dataclasses.asdict(params.model), params.seed],
        "data": sha256_file(nli_path), "code": code_hash(ENCODER_CODE)}, every_steps=50, what="the encoder step")
    encoder = train_encoder_step(model, nli, p.encoder, params.seed, plan, log_metric)  # deletes it when done
    summary = train_head(model, nli, p, params.seed, cache_dir, log_metric)
    if encoder is not None:
        summary["encoder"] = encoder
    with atomic.staged_dir(out_dir) as staged:  # a reader never sees a half-saved model
        model.save(staged)
        (staged / "training_summary.json").write_text(json.dumps(summary, indent=2))
    return summary

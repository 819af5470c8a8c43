"""Stage 1's runner: NLI training table -> ``models/stage1`` (frozen encoder + trained head)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pandas as pd

from stsreg import atomic, runtime
from stsreg.config import Params
from stsreg.model import SiameseRegressor
from stsreg.runners import NOOP
from stsreg.hashing import fingerprint, sha256_file
from stsreg.training.stage1 import train_encoder_step, train_head


def run_stage1(params: Params, nli_path: Path, out_dir: Path, cache_dir: Path, log_metric=NOOP,
               ckpt_dir: Path = Path("checkpoints/stage1")) -> dict:
    """NLI training table -> ``out_dir`` (encoder, trained on NLI first when ``stage1.encoder.objective`` is set,
    then frozen + trained head, ``training_summary.json``). The encoder step resumes from a checkpoint in
    ``ckpt_dir`` keyed by its settings, the model settings, the seed and the NLI table."""
    runtime.set_seed(params.seed)
    model = SiameseRegressor.from_params(params.model)
    model.token_cache = runtime.cache_dir("tokens")
    nli = pd.read_parquet(nli_path)
    p = params.stage1
    key = fingerprint([dataclasses.asdict(p.encoder), dataclasses.asdict(params.model), params.seed, sha256_file(nli_path)],
                      length=16)
    encoder = train_encoder_step(model, nli, p.encoder, params.seed, ckpt_dir / f"encoder-{key}.pt", log_metric)
    summary = train_head(model, nli, p, params.seed, cache_dir, log_metric)
    if encoder is not None:
        summary["encoder"] = encoder
    with atomic.staged_dir(out_dir) as staged:  # a reader never sees a half-saved model
        model.save(staged)
        (staged / "training_summary.json").write_text(json.dumps(summary, indent=2))
    return summary

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
from stsreg.infra.hashing import fingerprint, sha256_file
from stsreg.product.training.checkpoint import key_mismatch
from stsreg.product.training.stage1_training import train_encoder_step, train_head


#: The code an encoder-step checkpoint is keyed with: the NLI training loop and what it imports.
ENCODER_CODE = ("stsreg.product.training.stage1_training", "stsreg.product.training.nli")


def encoder_checkpoint(ckpt_dir: Path, parts: dict) -> Path:
    """The checkpoint path of the encoder step keyed by ``parts`` (``{part: JSON-able value}``). When no checkpoint
    has this key but another one is there, says in one line which parts differ (the step then starts from step 0).
    The key's parts are written beside it (``encoder-KEY.json``) for that comparison."""
    digests = {name: fingerprint(value) for name, value in parts.items()}
    path = ckpt_dir / f"encoder-{fingerprint(digests)}.pt"
    if not path.exists():
        for other in sorted(ckpt_dir.glob("encoder-*.json")):
            if other.with_suffix(".pt").exists():
                why = key_mismatch(json.loads(other.read_text(encoding="utf-8")), digests)
                print(f"encoder step starts from step 0: checkpoint {other.with_suffix('.pt')} was made with other "
                      f"{why}")
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    atomic.write_text(path.with_suffix(".json"), json.dumps(digests, sort_keys=True))
    return path


def run_stage1(params: Params, nli_path: Path, out_dir: Path, cache_dir: Path, log_metric=NOOP,
               ckpt_dir: Path = Path("checkpoints/stage1")) -> dict:
    """NLI training table -> ``out_dir`` (encoder, trained on NLI first when ``stage1.encoder.objective`` is set,
    then frozen + trained head, ``training_summary.json``). The encoder step resumes from a checkpoint in
    ``ckpt_dir`` keyed by its settings, the model settings, the seed, the NLI table and its code
    (:func:`encoder_checkpoint`)."""
    runtime.set_seed(params.seed)
    model = SiameseRegressor.from_params(params.model)
    model.token_cache = runtime.cache_dir("tokens")
    nli = pd.read_parquet(nli_path)
    p = params.stage1
    key = encoder_checkpoint(ckpt_dir, {
        "settings": [dataclasses.asdict(p.encoder), dataclasses.asdict(params.model), params.seed],
        "data": sha256_file(nli_path), "code": code_hash(ENCODER_CODE)})
    # deletes the checkpoint when done
    encoder = train_encoder_step(model, nli, p.encoder, params.seed, key, log_metric)
    key.with_suffix(".json").unlink(missing_ok=True)
    summary = train_head(model, nli, p, params.seed, cache_dir, log_metric)
    if encoder is not None:
        summary["encoder"] = encoder
    with atomic.staged_dir(out_dir) as staged:  # a reader never sees a half-saved model
        model.save(staged)
        (staged / "training_summary.json").write_text(json.dumps(summary, indent=2))
    return summary

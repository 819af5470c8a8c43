"""Stage runners: load the stage's inputs, seed, build the model, call the training function, save.

Shared by the CLI (bare and under torchrun) and the Prefect flows, so every entry point runs the same code.
``log_metric(key, value, step)`` receives metrics (an MLflow :class:`~stsreg.tracking.MetricBuffer` in flows).
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import torch

from stsreg import atomic
from stsreg.config import Params
from stsreg.model import SiameseRegressor
from stsreg.stage1 import train_head
from stsreg.train import fine_tune, init_distributed, resolve_device, set_seed, world

NOOP = lambda key, value, step: None  # noqa: E731


def run_stage1(params: Params, nli_path: Path, out_dir: Path, cache_dir: Path, log_metric=NOOP) -> dict:
    """NLI training table -> ``out_dir`` (frozen encoder + trained head)."""
    set_seed(params.seed)
    m = params.model
    model = SiameseRegressor.from_params(m)
    summary = train_head(model, pd.read_parquet(nli_path), params.stage1, params.seed, cache_dir, log_metric)
    with atomic.staged_dir(out_dir) as staged:  # a reader never sees a half-saved model
        model.save(staged)
        (staged / "training_summary.json").write_text(json.dumps(summary, indent=2))
    return summary


def stage2_data(sts_path: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(train, dev): STS-B train + SICK-R train on their raw scales, and STS-B dev.

    Test rows are never read (a parquet filter keeps them out of memory): training and every choice made on
    its dev curve (checkpoint selection, the search) cannot see a test label."""
    sts = pd.read_parquet(sts_path, filters=[("split", "in", ["train", "dev"])])
    train = sts[sts.dataset.isin(["stsb", "sickr"]) & (sts.split == "train")].reset_index(drop=True)
    dev = sts[(sts.dataset == "stsb") & (sts.split == "dev")].reset_index(drop=True)
    return train, dev


def run_stage2(params: Params, sts_path: Path, init_dir: Path, out_dir: Path, ckpt_dir: Path, log_metric=NOOP) -> dict:
    """Stage-1 model + STS tables -> ``out_dir`` (best STS-B dev checkpoint)."""
    init_distributed(resolve_device())
    return fine_tune_on_sts(params, sts_path, SiameseRegressor.load(init_dir), out_dir, ckpt_dir, log_metric)


def fine_tune_on_sts(params: Params, sts_path: Path, model: SiameseRegressor, out_dir: Path, ckpt_dir: Path,
                     log_metric=NOOP, keep: str | None = None, on_eval=None) -> dict:
    """Any starting model + STS tables -> ``out_dir``: stage 2's data (``stage2.max_train_pairs`` applied) and loop.

    ``keep`` (default ``stage2.keep``): ``best`` (never worse on dev than the start) or ``trained`` (the best after
    step 0). ``on_eval(step, dev_spearman)``: see :func:`stsreg.train.fine_tune`."""
    set_seed(params.seed)
    train, dev = stage2_data(sts_path)
    p = params.stage2
    if p.max_train_pairs and len(train) > p.max_train_pairs:
        train = train.sample(n=p.max_train_pairs, random_state=params.seed).reset_index(drop=True)
    return fine_tune(model, train, dev, p, params.seed, out_dir, ckpt_dir, resolve_device(), log_metric, keep=keep,
                     on_eval=on_eval)


def is_main_process() -> bool:
    return world()[1] == 0


def device_name(device: torch.device | None = None) -> str:
    """The GPU's name, or ``cpu``; of ``device``, default the one training would use."""
    d = device or resolve_device()
    return torch.cuda.get_device_name(d) if d.type == "cuda" else "cpu"

"""Stage 1's runner: NLI training table -> ``models/stage1`` (frozen encoder + trained head)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from stsreg import atomic, runtime
from stsreg.config import Params
from stsreg.model import SiameseRegressor
from stsreg.runners import NOOP
from stsreg.training.stage1 import train_head


def run_stage1(params: Params, nli_path: Path, out_dir: Path, cache_dir: Path, log_metric=NOOP) -> dict:
    """NLI training table -> ``out_dir`` (frozen encoder + trained head, ``training_summary.json``)."""
    runtime.set_seed(params.seed)
    model = SiameseRegressor.from_params(params.model)
    model.token_cache = runtime.cache_dir("tokens")
    summary = train_head(model, pd.read_parquet(nli_path), params.stage1, params.seed, cache_dir, log_metric)
    with atomic.staged_dir(out_dir) as staged:  # a reader never sees a half-saved model
        model.save(staged)
        (staged / "training_summary.json").write_text(json.dumps(summary, indent=2))
    return summary

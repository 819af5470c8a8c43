"""Stage 2 under ``torchrun --nproc_per_node=2`` (DDP, gloo on CPU) matches one process at the same global batch.

Slow: starts three Python processes that each import torch + transformers. Dropout is switched off in the tiny
model, so two processes see exactly the batches one process sees and only float summation order differs.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.conftest import REPO
from tests.unit.test_train import weights

pytestmark = pytest.mark.slow


def _no_dropout_copy(backbone: str, dest: Path) -> str:
    shutil.copytree(backbone, dest)
    cfg = json.loads((dest / "config.json").read_text())
    cfg.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    (dest / "config.json").write_text(json.dumps(cfg))
    return str(dest)


def _train(cmd: list[str], work: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "RANK", "LOCAL_RANK")}
    env.update(PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
    proc = subprocess.run(cmd + [str(work), "160"], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads((work / "summary.json").read_text())


def test_two_processes_match_one(tiny_backbone, tmp_path):
    backbone = _no_dropout_copy(tiny_backbone, tmp_path / "backbone")
    helper = ["-m", "tests.helpers.run_stage2", backbone]
    one = _train([sys.executable, *helper], tmp_path / "one")
    two = _train([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", *helper],
                 tmp_path / "two")
    assert one["world_size"] == 1 and two["world_size"] == 2
    assert one["steps"] == two["steps"] == 40  # 160 pairs / global batch 8 x 2 epochs
    a, b = weights(tmp_path / "one/out"), weights(tmp_path / "two/out")
    assert a.keys() == b.keys()
    worst = max((a[k] - b[k]).abs().max().item() for k in a)
    assert worst < 1e-4, f"largest weight difference {worst:.2e}"
    for (sa, da), (sb, db) in zip(one["dev_curve"], two["dev_curve"], strict=True):
        assert sa == sb and da == pytest.approx(db, abs=0.05)
    assert one["best_step"] == two["best_step"]

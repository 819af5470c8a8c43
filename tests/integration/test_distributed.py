"""Stage 2 under torchrun (DDP, gloo on CPU) matches one process at the same global batch: one machine with
``--nproc_per_node=2``, and two "nodes" (``--nnodes=2 --nproc_per_node=1``, two torchrun agents meeting on loopback,
as two machines would on their network).

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

from tests.conftest import REPO, free_port
from tests.helpers.weights import weights

pytestmark = pytest.mark.slow


def _no_dropout_copy(backbone: str, dest: Path) -> str:
    shutil.copytree(backbone, dest)
    cfg = json.loads((dest / "config.json").read_text())
    cfg.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    (dest / "config.json").write_text(json.dumps(cfg))
    return str(dest)


def _env() -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "RANK", "LOCAL_RANK")}
    env.update(PYTHONPATH=str(REPO), OMP_NUM_THREADS="1", STSREG_TEST_PRECISION="fp32")
    return env


def _train(cmds: list[list[str]], work: Path) -> dict:
    """Start every command (one per node) at once, wait for all; rank 0's summary."""
    procs = [subprocess.Popen(cmd + [str(work), "160"], cwd=REPO, env=_env(), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE,
                              text=True) for cmd in cmds]
    for proc in procs:
        _, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-3000:]
    return json.loads((work / "summary.json").read_text())


@pytest.mark.parametrize("layout", ["one node, 2 processes", "2 nodes, 1 process each"])
def test_distributed_matches_one_process(tiny_backbone, tmp_path, layout):
    backbone = _no_dropout_copy(tiny_backbone, tmp_path / "backbone")
    helper = ["-m", "tests.helpers.run_stage2", backbone]
    one = _train([[sys.executable, *helper]], tmp_path / "one")
    run = [sys.executable, "-m", "torch.distributed.run"]
    if layout.startswith("one node"):
        cmds = [run + ["--standalone", "--nproc_per_node=2", *helper]]
    else:  # what each of two machines runs, with MASTER on the first one's address
        port = free_port()
        cmds = [run + ["--nnodes=2", "--nproc_per_node=1", f"--node_rank={rank}", "--master_addr=127.0.0.1",
                       f"--master_port={port}", *helper] for rank in (0, 1)]
    two = _train(cmds, tmp_path / "two")
    assert one["world_size"] == 1 and two["world_size"] == 2
    assert one["steps"] == two["steps"] == 40  # 160 pairs / global batch 8 x 2 epochs
    a, b = weights(tmp_path / "one/out"), weights(tmp_path / "two/out")
    assert a.keys() == b.keys()
    worst = max((a[k] - b[k]).abs().max().item() for k in a)
    assert worst < 1e-4, f"largest weight difference {worst:.2e}"
    for (sa, da), (sb, db) in zip(one["dev_curve"], two["dev_curve"], strict=True):
        assert sa == sb and da == pytest.approx(db, abs=0.05)
    assert one["best_step"] == two["best_step"]

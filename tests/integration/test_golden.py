"""The golden run: each product stage and experiment kind on a tiny fixed sample gives the committed digests
(``tests/golden/hashes.json``), and a change to what training computes (one part in a million of the learning rate)
is seen as a moved digest."""

import os
import subprocess
import sys

from tests.conftest import REPO


def _golden(*args: str, prelude: str = "") -> subprocess.CompletedProcess:
    code = f"{prelude}\nimport sys\nfrom tests.golden.__main__ import main\nsys.exit(main({list(args)!r}))"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "PREFECT_", "STSREG_"))}
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)


def test_golden_digests_hold():
    run = _golden()
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "golden: ok:" in run.stdout and " 0 moved" in run.stdout


def test_golden_sees_a_change_in_what_training_computes():
    # a behaviour change as small as they come: stage 2's learning rate scaled by 1 + 1e-6
    prelude = ("import tests.golden.__main__\n"
               "from stsreg.product.training import stage2_training as s\n"
               "_build = s.build_optimizer\n"
               "s.build_optimizer = lambda model, lr, *a: _build(model, lr * (1 + 1e-6), *a)")
    run = _golden("stage2", prelude=prelude)
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-3000:]
    assert "golden: MOVED stage2: model.safetensors: moved" in run.stdout
    assert "MOVED stage1" not in run.stdout  # what came before the change holds

"""The golden run: each product stage and experiment kind on a tiny fixed sample gives the committed digests
(``tests/golden/hashes.json``), with the kernels pinned and with this CPU's own kernels alike, and a change to what
training computes (one part in a thousand of the learning rate, one percent of the loss's buffer) is seen as a moved
output."""

import os
import subprocess
import sys

from tests.conftest import REPO


def _golden(*args: str, prelude: str = "") -> subprocess.CompletedProcess:
    code = f"{prelude}\nimport sys\nfrom tests.golden.__main__ import main\nsys.exit(main({list(args)!r}))"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "PREFECT_", "STSREG_"))}
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)


def _stage2_moved(prelude: str) -> str:
    """Golden's stage-2 run with ``prelude``'s change: it must fail, naming stage 2's weights; returns its output."""
    run = _golden("stage2", prelude=prelude)
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-3000:]
    assert "golden: MOVED stage2: model.safetensors: moved" in run.stdout
    return run.stdout


def test_golden_digests_hold():
    run = _golden()
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "golden: ok:" in run.stdout and " 0 moved" in run.stdout


def test_golden_holds_on_this_cpus_own_kernels():
    # the pins off: ATen, MKL and oneDNN pick this CPU's instruction set (AVX2, AVX-512, AMX), as another machine's
    # golden run would; the digests must hold all the same (tests/golden/digest.py: why the tolerance covers it)
    prelude = ("import os, tests.golden.__main__\n"
               "for key in ('ATEN_CPU_CAPABILITY', 'MKL_CBWR', 'ONEDNN_MAX_CPU_ISA'): os.environ.pop(key)")
    run = _golden(prelude=prelude)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert " 0 moved" in run.stdout


def test_golden_sees_a_change_in_what_training_computes():
    # the smallest change the tolerance promises to see: stage 2's learning rate scaled by 1.001
    prelude = ("import tests.golden.__main__\n"
               "from stsreg.product.training import stage2_training as s\n_build = "
               "s.build_optimizer\ns.build_optimizer = lambda model, lr, *a: _build(model, lr * 1.001, *a)")
    assert "MOVED stage1" not in _stage2_moved(prelude)  # what came before the change holds


def test_golden_sees_a_change_of_a_loss_constant():
    # the buffer of Smooth K2 one percent wider: a loss constant the weights feel
    prelude = ("import tests.golden.__main__\n"
               "from stsreg.product import losses as L\ndef forward(self, pred, labels):\n    x, active = "
               "L._buffer(pred, labels, self.x0 * 1.01, self.zero_negative)\n    return (self.k * (x - self.x0 * "
               "1.01).pow(2) * active).mean()\nL.SmoothK2.forward = forward")
    _stage2_moved(prelude)

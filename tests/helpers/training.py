"""Stage 2 as the tests call it: :func:`stsreg.product.training.stage2_training.fine_tune` with the objective its params
name."""

from pathlib import Path

from stsreg.product.objective import Objective
from stsreg.product.training.stage2_training import Stage2Job, fine_tune


def fine_tune_params(model, train, dev, p, seed: int, out_dir: Path, ckpt_dir: Path, **job) -> dict:
    """``fine_tune`` of ``train`` / ``dev`` into ``out_dir`` (``job``: the rest of :class:`Stage2Job`, e.g. ``keep``)
    with ``Objective.from_params(p)``: what :func:`stsreg.product.runners.stage2_runner.run_stage2` builds, without
    reading a params file."""
    return fine_tune(model, Stage2Job(train, dev, out_dir, ckpt_dir, **job), Objective.from_params(p), p, seed)

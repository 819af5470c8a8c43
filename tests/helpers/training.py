"""Stage 2 as the tests call it: :func:`stsreg.product.training.stage2_training.fine_tune` with the objective its params
name."""

from stsreg.product.objective import Objective
from stsreg.product.training.stage2_training import fine_tune


def fine_tune_params(model, train, dev, p, *args, **kwargs) -> dict:
    """``fine_tune(model, train, dev, Objective.from_params(p), p, ...)``: what
    :func:`stsreg.product.runners.stage2_runner.run_stage2` builds, without reading a params file."""
    return fine_tune(model, train, dev, Objective.from_params(p), p, *args, **kwargs)

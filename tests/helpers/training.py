"""Stage 2 as the tests call it: :func:`stsreg.training.stage2.fine_tune` with the objective its params name."""

from stsreg.objective import Objective
from stsreg.training.stage2 import fine_tune


def fine_tune_params(model, train, dev, p, *args, **kwargs) -> dict:
    """``fine_tune(model, train, dev, Objective.from_params(p), p, ...)``: what :func:`stsreg.runners.stage2.run_stage2`
    builds, without reading a params file."""
    return fine_tune(model, train, dev, Objective.from_params(p), p, *args, **kwargs)

"""What stage 2 starts from and with: one object, made by :func:`stsreg.product.runners.warm_start.starting_point`
(the pinned champion or stage 1) or by an experiment (a model of its own), taken by
:func:`stsreg.product.runners.stage2_runner.run_stage2`."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from stsreg.infra.config import Params


class Start(NamedTuple):
    """``init`` (a saved folder or a :class:`~stsreg.product.model.SiameseRegressor`), ``params`` (a warm start's
    epochs and lr in place), ``origin`` (what the starting weights are, for the summary, tags and card: ``{"from":
    "stage1" | "champion", ...}``; None: not recorded) and ``seen`` (the champion's train-row hashes, to tell its rows
    from the new ones; None for a cold start or a champion without them)."""

    init: object
    params: Params
    origin: dict | None = None
    seen: np.ndarray | None = None

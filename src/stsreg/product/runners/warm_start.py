"""Where stage 2 starts: ``models/stage1`` (a cold retrain), or the registry's ``@champion`` (a warm one).

A warm retrain (``stage2.warm_start.enabled``) continues the served model on the grown tables: every row, old and new,
for ``warm_start.epochs`` (default 1, against ``stage2.epochs`` 3) at ``warm_start.lr``, selected on the same dev
split (step 0 is the champion itself, so ``keep: best`` never hands on a model worse on dev than the one served). It
is the loop's lever on stage 2's time; the gate still judges the result against the champion on the test pairs.

Stage 2 then depends on the champion, which DVC does not see: a promotion alone does not make stage 2 out of date.
:func:`starting_point` says what it started from (``origin``); the flow writes it into ``training_summary.json`` and
the run's tags (``warm_start.version``), so the version trained on is named with the model.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import tempfile
from pathlib import Path

from stsreg.infra.config import Params

log = logging.getLogger(__name__)


def starting_point(params: Params, stage1_dir: Path, uri: str | None = None) -> tuple[object, Params, dict]:
    """(init, params, origin): what :func:`stsreg.product.runners.stage2_runner.run_stage2` starts from and with.

    - cold (warm start off, no champion yet, or a champion of another backbone): ``stage1_dir`` and ``params`` as
      given; ``origin`` ``{"from": "stage1"}`` plus ``why`` when a warm start was asked for;
    - warm: the champion loaded (a :class:`~stsreg.product.model.SiameseRegressor` at ``model.max_length`` and
      ``model.precision``), ``params`` with ``stage2.epochs`` / ``stage2.lr`` replaced by the warm ones, and
      ``origin`` ``{"from": "champion", "version", "run_id"}``.

    ``uri``: the MLflow store (None: the project's, :func:`stsreg.infra.tracking.tracking_uri`)."""
    warm = params.stage2.warm_start
    if not warm.enabled:
        return stage1_dir, params, {"from": "stage1"}
    from stsreg.infra import tracking
    from stsreg.product import registry
    from stsreg.product.model import SiameseRegressor

    champion = registry.version_by_alias(tracking.client(uri), registry.MODEL_NAME, "champion")
    if champion is None:
        return _cold(stage1_dir, params, "no champion yet")
    with tempfile.TemporaryDirectory() as tmp:  # loaded into memory: every DDP process reads its own copy
        folder = registry.model_folder(champion, uri, tmp)
        backbone = json.loads((folder / "stsreg_model.json").read_text())["backbone"]
        if backbone != params.model.backbone:
            return _cold(stage1_dir, params, f"champion v{champion.version} is of backbone {backbone!r}, "
                                             f"model.backbone is {params.model.backbone!r}")
        model = SiameseRegressor.load(folder, precision=params.model.precision)
    # the registered folder truncates at the evaluation's length; training runs at the model's, as stage 1's does
    model.config.max_length = params.model.max_length
    stage2 = dataclasses.replace(params.stage2, epochs=warm.epochs, lr=warm.lr)
    log.info("stage 2 starts from champion v%s (warm start: %d epoch(s) at lr %g)", champion.version, warm.epochs,
             warm.lr)
    return model, dataclasses.replace(params, stage2=stage2), {"from": "champion", "version": int(champion.version),
                                                               "run_id": champion.run_id}


def origin_of(model_dir: Path) -> dict:
    """Where the stage-2 folder ``model_dir`` started: its ``training_summary.json``'s ``started_from``
    (:func:`starting_point`'s ``origin``); ``{"from": "stage1"}`` for a folder without one."""
    summary = Path(model_dir) / "training_summary.json"
    saved = json.loads(summary.read_text()) if summary.exists() else {}
    return saved.get("started_from") or {"from": "stage1"}


def _cold(stage1_dir: Path, params: Params, why: str) -> tuple[Path, Params, dict]:
    log.info("stage 2 starts from %s (warm start asked for, but %s)", stage1_dir, why)
    return stage1_dir, params, {"from": "stage1", "why": why}

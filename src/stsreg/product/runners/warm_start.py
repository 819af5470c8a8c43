"""Where stage 2 starts: the champion pinned in ``champion.json`` (a warm retrain, the default), or ``models/stage1``.

A warm retrain continues the served model on what arrived: every row new to it, and a replay of its old rows sized
from the new ones (:func:`stsreg.product.training.replay.replayed`, told apart by the ``train_rows.npy`` each stage-2
folder keeps), for ``warm_start.epochs`` (default 1, against ``stage2.epochs`` 3) at ``warm_start.lr``, selected on the
same dev split (step 0 is the champion itself, so ``keep: best`` never hands on a model worse on dev than the one
served). The gate still judges the result against the champion on the test pairs.

What it continues is the version ``champion.json`` pins (:mod:`stsreg.product.champion_pin`), a dependency of stage 2
in ``dvc.yaml``: ``dvc status`` sees it move, ``dvc.lock`` records it, and :func:`starting_point` fetches exactly that
version (its weights checked against the pin's digest). With no champion pinned, one of another backbone, or
``warm_start.enabled: false``, stage 2 starts from stage 1; ``origin`` says which and why, into
``training_summary.json``, the run's tags (``warm_start.version``) and the model card.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import tempfile
from pathlib import Path

import numpy as np

from stsreg.infra.config import Params
from stsreg.product.champion_pin import PIN_FILE, pinned_folder, read_pin
from stsreg.product.model_files import TRAIN_ROWS
from stsreg.product.runners.start import Start

log = logging.getLogger(__name__)


def starting_point(params: Params, stage1_dir: Path, uri: str | None = None, pin_path: Path | str = PIN_FILE) -> Start:
    """What :func:`stsreg.product.runners.stage2_runner.run_stage2` starts from and with
    (:class:`~stsreg.product.runners.start.Start`).

    - cold (``warm_start.enabled`` false, the pin in ``pin_path`` names no champion, or one of another backbone):
      ``stage1_dir`` and ``params`` as given; ``origin`` ``{"from": "stage1", "why"}``;
    - warm: the pinned champion (:mod:`stsreg.product.champion_pin`: the version ``pin_path`` names, fetched from the
      registry and checked against its digest, whatever the alias says today) loaded at ``model.max_length`` and
      ``model.precision``, ``params`` with ``stage2.epochs`` / ``stage2.lr`` replaced by the warm ones, and ``origin``
      ``{"from": "champion", "version", "run_id", "weights"}``; ``seen`` holds the champion's train rows, or
      ``origin["replay_why"]`` says why every row is replayed (a champion trained before the rows were kept).

    ``uri``: the MLflow store (None: the project's, :func:`stsreg.infra.tracking.tracking_uri`)."""
    if not params.stage2.warm_start.enabled:
        return _cold(stage1_dir, params, "stage2.warm_start.enabled is false")
    pin = read_pin(pin_path)
    if pin.version is None:
        return _cold(stage1_dir, params, pin.why)
    if pin.backbone != params.model.backbone:
        return _cold(stage1_dir, params, f"the pinned champion v{pin.version} is of backbone {pin.backbone!r}, "
                                         f"model.backbone is {params.model.backbone!r}")
    from stsreg.product.model import SiameseRegressor  # torch: only when stage 2 starts warm

    warm = params.stage2.warm_start
    with tempfile.TemporaryDirectory() as tmp:  # loaded into memory: every DDP process reads its own copy
        folder = pinned_folder(pin, uri, tmp)
        model = SiameseRegressor.load(folder, precision=params.model.precision)
        seen, why = champion_rows(folder)
    # the registered folder truncates at the evaluation's length; training runs at the model's, as stage 1's does
    model.config.max_length = params.model.max_length
    stage2 = dataclasses.replace(params.stage2, epochs=warm.epochs, lr=warm.lr)
    log.info("stage 2 starts from %s (warm start: %d epoch(s) at lr %g)", pin.words(), warm.epochs, warm.lr)
    origin = {"from": "champion", "version": pin.version, "run_id": pin.run_id, "weights": pin.weights}
    if why:  # nothing to tell the champion's rows by: every row, as a cold retrain draws them
        origin["replay_why"] = f"champion v{pin.version} {why}"
        log.info("every row replayed: %s", origin["replay_why"])
    return Start(model, dataclasses.replace(params, stage2=stage2), origin, seen)


def champion_rows(folder: Path) -> tuple[np.ndarray | None, str]:
    """(the (n,) uint64 hashes of :data:`TRAIN_ROWS` in a model folder, "") or (None, why they cannot be used): a
    folder trained before the rows were kept has none; an unreadable or malformed file is named, not trained on."""
    path = Path(folder) / TRAIN_ROWS
    if not path.exists():
        return None, f"has no {TRAIN_ROWS} (trained before rows were kept)"
    try:
        seen = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        return None, f"has an unreadable {TRAIN_ROWS} ({exc})"
    if seen.ndim != 1 or seen.dtype != np.uint64:
        return None, f"has a {TRAIN_ROWS} of {seen.dtype} {seen.shape}, not (n,) uint64 row hashes"
    return seen, ""


def origin_of(model_dir: Path) -> dict:
    """Where the stage-2 folder ``model_dir`` started: its ``training_summary.json``'s ``started_from``
    (:func:`starting_point`'s ``origin``); ``{"from": "stage1"}`` for a folder without one."""
    summary = Path(model_dir) / "training_summary.json"
    saved = json.loads(summary.read_text()) if summary.exists() else {}
    return saved.get("started_from") or {"from": "stage1"}


def warm_text(origin: dict) -> str:
    """A warm start (an ``origin`` from the champion) in words, for the card, the retrain report and the loop report:
    the version continued and its rows ("champion v1 (a warm retrain) on 181 new rows, 362 of 508 old qa rows and 724
    of 10,249 other old rows replayed")."""
    text = f"champion v{origin['version']} (a warm retrain)"
    r = origin.get("rows")
    if r and "task" in r:
        return (f"{text} on {r['new']:,} new rows, {r['task']['replayed']:,} of {r['task']['old']:,} old "
                f"{r['task']['table']} rows and {r['other']['replayed']:,} of {r['other']['old']:,} other old rows "
                "replayed")
    if r and r.get("why"):
        return f"{text}: {r['why']} ({r['replayed']:,} rows)"
    if r and "replay" in r:  # a summary written before the replay was sized from the new rows
        return f"{text} on {r['new']:,} new rows and {r['replayed']:,} of {r['old']:,} old ones replayed " \
               f"(replay {r['replay']:g})"
    if origin.get("replay_why"):
        return f"{text} every old row replayed: {origin['replay_why']}"
    return text


def _cold(stage1_dir: Path, params: Params, why: str) -> Start:
    log.info("stage 2 starts from %s (%s)", stage1_dir, why)
    return Start(stage1_dir, params, {"from": "stage1", "why": why})


def nothing_learned(summary: dict) -> dict | None:
    """When a warm retrain kept its start (``stage2.keep: best`` and step 0, the champion itself, was never beaten on
    the dev split): ``{"version", "new_rows", "start_dev", "best_trained_dev", "best_trained_step", "steps"}``, else
    None. Such a stage-2 folder holds the champion's own weights: registering and gating it would judge a copy, so the
    retrain stops there (:func:`nothing_learned_text` says why). ``summary``: ``training_summary.json``."""
    origin = summary.get("started_from") or {}
    if origin.get("from") != "champion" or summary.get("kept") != "best" or summary.get("best_step") != 0:
        return None
    return {"version": origin.get("version"), "new_rows": (origin.get("rows") or {}).get("new"),
            "start_dev": summary.get("start_dev_spearman"),
            "best_trained_dev": summary.get("trained_best_dev_spearman"),
            "best_trained_step": summary.get("trained_best_step"), "steps": summary.get("steps")}


def nothing_learned_text(found: dict, dev_table: str) -> str:
    """:func:`nothing_learned` in words: "nothing learned from 181 new rows: qa dev 82.67 at the start (champion v1),
    82.51 at best after it (step 150 of 184); no challenger registered"."""
    rows = f"{found['new_rows']:,} new rows" if found.get("new_rows") is not None else "the grown tables"
    after = (f"{found['best_trained_dev']:.2f} at best after it (step {found['best_trained_step']} of {found['steps']})"
             if found.get("best_trained_dev") is not None and found.get("best_trained_step", -1) >= 0
             else "no evaluation after it")
    return (f"nothing learned from {rows}: {dev_table} dev {found['start_dev']:.2f} at the start (champion "
            f"v{found['version']}), {after}; no challenger registered")

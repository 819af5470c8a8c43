"""The comparison experiment: does regression fine-tuning beat contrastive fine-tuning on this backbone?

Every method trains on the same stage-2 data (STS-B train + SICK-R train) with the same optimizer, schedule,
batch and epochs (``params.stage2``, epochs ``compare.epochs`` when set); only the objective and the starting point
differ:

==================  ===============================  ==============================================
method              starts from                      stage-2 objective
==================  ===============================  ==============================================
base                the backbone, untouched          none
contrast            the encoder                      in-batch contrastive on pairs >= min label
cosent              the encoder                      CoSENT on cosine
cosine_mse          the encoder                      MSE of cosine vs label / 5 (SBERT's regression)
ours                stage 1 (head trained on NLI)    Smooth K2 on the head (the paper's method)
translated_relu     stage 1                          Translated ReLU on the head
mse                 stage 1                          MSE on the head
ours_cos            stage 1                          Smooth K2 on |cos_a*cos + cos_b - label|
ours_joint          stage 1                          Smooth K2 on the head + joint_lambda * on the cosine
==================  ===============================  ==============================================

"The encoder" is stage 1's encoder without its head: the backbone itself, or, with ``stage1.encoder.objective``
set, the backbone after stage 1's NLI step, so that every trained row starts from the same weights.

Each trained row is the model its method trained: the best STS-B dev evaluation *after* step 0 (as the
authors select; production stage 2 instead keeps its start when nothing beats it). The dev Spearman at the
start and of the kept checkpoint are reported beside the test figures, so a row that loses says how.

Each (method, seed) keeps its results in ``<out>/rows/<method>-<seed>/`` (:mod:`stsreg.experiments.row_results`, in
git: metrics, per-pair scores, training summary, ``run.json``) and is skipped on a rerun when its ``run.json``
fingerprint (settings, seed, data, code) still matches: an interrupted comparison resumes where it stopped, and a clone
trains only the rows it lacks. The trained weights are not kept; stage-1 models stay in the work folder ``runs/``.
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
from pathlib import Path

import pandas as pd

from stsreg.infra.codehash import RowKey
from stsreg.infra.hashing import fingerprint, sha256_file
from stsreg.infra.config import Params
from stsreg.infra.method_specs import COMPARE
from stsreg.product.precision import cache_name
from stsreg.infra.runtime import set_seed
from stsreg.product.runners.start import Start

log = logging.getLogger(__name__)

#: Each row's recipe ({"init", "loss"}; None: nothing trained), from the declared rows
#: (:data:`stsreg.infra.method_specs.COMPARE`).
METHODS: dict[str, dict | None] = {m.name: {"init": m.init, "loss": m.loss} if m.init else None
                                   for m in COMPARE.values()}
#: Rows trained with the paper's framework (stage 1 head on NLI, then a buffered / regression stage 2). The paired
#: tests compare the one with the best mean STS-B *dev* score (never a test score) against every other row.
REGRESSION = tuple(m.name for m in COMPARE.values() if m.init == "stage1")


#: The code one (method, seed) run executes (training and evaluation); its hash is part of each run's fingerprint.
RUN_CODE = ("stsreg.experiments.compare", "stsreg.product.runners.stage1_runner",
            "stsreg.product.runners.stage2_runner", "stsreg.product.runners.eval_runner")


def stage2_for(params: Params, method: str):
    """The stage-2 settings ``method`` trains with: ``params.stage2`` with the method's loss and ``compare.epochs``."""
    return dataclasses.replace(params.stage2, loss=METHODS[method]["loss"],
                               epochs=params.compare.epochs or params.stage2.epochs)


def starts_from_stage1(params: Params, method: str) -> bool:
    """Whether ``method`` starts from a stage-1 model: the head-loss methods always; the others ("the encoder")
    when stage 1 trains the encoder (``stage1.encoder.objective``), since its encoder is then not the backbone."""
    return METHODS[method]["init"] == "stage1" or params.stage1.encoder.objective != "none"


def stage1_key(params: Params, nli_path: Path) -> str:
    """The key of the stage-1 model a comparison keeps per seed (``runs/_stage1-<seed>-<key>``): the stage-1 and
    model settings, the NLI table, the resolved precision."""
    return fingerprint([dataclasses.asdict(params.stage1), dataclasses.asdict(params.model), sha256_file(nli_path),
                        cache_name(params.model.precision)], length=12)


def run_key(params: Params, method: str, seed: int, sts_sha: str, nli_sha: str) -> RowKey:
    """Settings, seed, data and code of one run: a rerun reuses a finished run only if all four are unchanged."""
    parts = {"method": method, "spec": METHODS[method], "seed": seed, "model": dataclasses.asdict(params.model),
             "precision": cache_name(params.model.precision), "evaluate": dataclasses.asdict(params.evaluate),
             "sts": sts_sha}
    if METHODS[method] is not None:
        parts["stage2"] = dataclasses.asdict(stage2_for(params, method))
        if starts_from_stage1(params, method):
            parts.update(stage1=dataclasses.asdict(params.stage1), nli=nli_sha)
    return RowKey(parts, RUN_CODE)


def train_method(params: Params, method: str, sts_path: Path, nli_path: Path, work: Path, log_metric,
                 cache_dir: Path = Path("cache/embeddings")) -> Path:
    """Train ``method`` with ``params`` (``params.seed``: the row's seed); returns the model folder to evaluate (the
    backbone itself for ``base``).

    Head-loss methods start from a stage-1 model kept per seed under ``work.parent``, keyed by the stage-1 and
    model settings and the NLI data, so a change of any of them trains a new one; the others from the same model
    when stage 1 trains the encoder, else from the backbone (the same encoder weights; the head is not used).
    """
    from stsreg.product.model import SiameseRegressor, resolve_backbone
    from stsreg.product.runners.stage1_runner import run_stage1
    from stsreg.product.runners.stage2_runner import run_stage2
    spec = METHODS[method]
    if spec is None:
        return Path(resolve_backbone(params.model.backbone))
    p, seed = params, params.seed
    if starts_from_stage1(p, method):
        stage1_dir = work.parent / f"_stage1-{seed}-{stage1_key(p, nli_path)}"
        if not (stage1_dir / "training_summary.json").exists():
            run_stage1(
                p, nli_path, stage1_dir, cache_dir, ckpt_dir=stage1_dir.with_name(stage1_dir.name + "-checkpoints")
            )
        model = SiameseRegressor.load(stage1_dir, precision=params.model.precision)
    else:
        set_seed(seed)  # the (unused) head's initialisation draws from the global RNG
        model = SiameseRegressor.from_params(p.model)
    p = dataclasses.replace(p, stage2=stage2_for(p, method))
    run_stage2(Start(model, p), sts_path, work / "model", work / "checkpoints", log_metric, keep="trained")
    # kept after the weights go
    shutil.copyfile(work / "model" / "training_summary.json", work / "training_summary.json")
    shutil.rmtree(work / "checkpoints", ignore_errors=True)
    return work / "model"


def reference_method(table: pd.DataFrame) -> str | None:
    """The regression row with the best mean STS-B dev Spearman of its kept checkpoint (dev only: no test figure
    takes part in the choice); None when the table has no regression row."""
    rows = table[table.method.isin(REGRESSION) & table.dev_kept.notna()]
    return None if rows.empty else str(rows.loc[rows.dev_kept.idxmax(), "method"])


#: Pairs the paper's claims rest on (tested whenever both rows ran): the buffer's shape (Smooth K2 vs Translated
#: ReLU) and the buffer against plain MSE, on the head.
CLAIM_PAIRS = (("ours", "translated_relu"), ("ours", "mse"))


def test_pairs(reference: str | None, methods) -> list[tuple[str, str]]:
    """``reference`` against every other row, then the claim pairs not already among them (both rows present)."""
    pairs = [(reference, m) for m in methods if m != reference] if reference else []
    for a, b in CLAIM_PAIRS:
        if a in methods and b in methods and (a, b) not in pairs and (b, a) not in pairs:
            pairs.append((a, b))
    return pairs


def budget(params: Params) -> str:
    """One line: the stage-2 budget every trained row shares."""
    s2 = stage2_for(params, "ours")
    return (f"Every trained row: {s2.epochs} epoch(s) of stage 2, batch {s2.batch_size}, lr {s2.lr:g}, warm-up "
            f"{s2.warmup_ratio:g}, {'length-grouped' if s2.group_by_length else 'random'} batches, precision "
            f"{params.model.precision}, max length {params.model.max_length}.")

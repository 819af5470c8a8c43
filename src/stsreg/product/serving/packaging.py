"""The folder a version is registered with: the trained model at its evaluated length, with exports and their quality.

:func:`package` copies a trained folder (``models/stage2``) and makes it the model the card describes and serving runs:

- **one maximum length**: ``stsreg_model.json`` and sentence-transformers' ``sentence_bert_config.json`` get the
  evaluation's ``max_length`` (``evaluate.max_length``), so the served model truncates where the scored one did;
- **sentence-transformers' files**: ``config_sentence_transformers.json`` names the similarity function (cosine), so
  ``SentenceTransformer(folder).similarity`` is the score the card reports (the card itself is added at logging);
- **exports** (:mod:`stsreg.product.serving.export`): ONNX fp32 and int8, each scored on the evaluation's pairs (the 7
tasks
  and every declared test table) and judged against torch's avg7 with ``serve.max_avg7_drop``; the verdicts go to
  ``onnx/backends.json`` (what serving reads) and to the version's tags (:func:`tags`);
- **auto's measurement** (:func:`stsreg.product.serving.export.record_choice`): the fastest servable backend on the
  registering CPU, so a server there starts and swaps without measuring.
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pandas as pd

from stsreg.infra.config import Params
from stsreg.product.serving import export
from stsreg.product.model_files import set_max_length, write_st_config

log = logging.getLogger(__name__)

def score_backend(folder: Path, backend: str, pairs: pd.DataFrame, batch_size: int) -> dict[str, float]:
    """The evaluation's metrics (:func:`stsreg.product.sts_eval.task_metrics`) of ``folder`` run on ``backend``."""
    from stsreg.product.model import SiameseRegressor
    from stsreg.product.sts_eval import score_pairs, task_metrics

    model = export.use_backend(SiameseRegressor.load(folder, precision="fp32").eval(), backend, folder)
    return task_metrics(score_pairs(model, pairs, batch_size))


def package(params: Params, model_dir: Path, dst: Path, sts_path: Path, torch_metrics: dict) -> dict[str, dict]:
    """Copy ``model_dir`` to ``dst`` and make it the registered folder (module docstring); returns the backends'
    verdicts (:func:`stsreg.product.serving.export.judge`, plus each declared table's Spearman under ``tables``).
    ``torch_metrics``: the evaluation's ``metrics.json`` of ``model_dir`` (torch, ``evaluate.max_length``)."""
    from stsreg.product.sts_eval import eval_pairs, own_tasks

    shutil.copytree(model_dir, dst)
    set_max_length(dst, params.evaluate.max_length)
    write_st_config(dst)  # already there when model_dir is stage 2's output; a folder from elsewhere gets it
    export.export_all(dst)
    pairs = eval_pairs(pd.read_parquet(sts_path))
    own = own_tasks(pairs)
    scores = {"torch": torch_metrics}
    for backend in export.FILES:
        scores[backend] = score_backend(dst, backend, pairs, params.evaluate.batch_size)
        log.info("%s: avg7 %.2f (torch %.2f)", backend, scores[backend]["avg7_spearman"],
                 torch_metrics["avg7_spearman"])
    verdicts = export.judge({b: m["avg7_spearman"] for b, m in scores.items()}, params.serve.max_avg7_drop)
    for backend, verdict in verdicts.items():
        verdict["tables"] = {t: round(scores[backend][f"{t}_spearman"], 4) for t in own}
        if backend != "torch":
            verdict["file"] = export.FILES[backend]
            verdict["mib"] = round((dst / export.FILES[backend]).stat().st_size / 2**20, 1)
    (dst / export.QUALITY).write_text(json.dumps(verdicts, indent=2))
    # what `serve.backend: auto` measures, measured once here: a server on this CPU starts and swaps without it
    from stsreg.product.model import SiameseRegressor

    export.record_choice(SiameseRegressor.load(dst, precision=params.serve.precision).eval(), dst)
    return verdicts


def tags(verdicts: dict[str, dict]) -> dict[str, str]:
    """The version's tags of the exports: ``backend.<name>.avg7`` / ``.drop`` / ``.serving`` / ``.reason``."""
    out = {}
    for backend, v in verdicts.items():
        if backend == "torch":
            continue
        out.update({f"backend.{backend}.avg7": f"{v['avg7']:.2f}", f"backend.{backend}.drop": f"{v['drop']:.2f}",
                    f"backend.{backend}.serving": str(v["serving"]).lower(), f"backend.{backend}.reason": v["reason"]})
    return out

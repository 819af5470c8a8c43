"""The NLI-only table (the paper's Table 1 analogue): the whole encoder trained on NLI alone, one row per objective.

Every row starts from ``model.backbone``, trains ``nli_table.epochs`` over the same number of examples
(``nli_table.max_pairs``) with the same batch, lr, warm-up, clipping and max length, keeps the final weights (no
selection: the paper trains one epoch and scores what it gets), and is scored by the evaluation stage's 7 tasks
(cosine of pooled embeddings). What each objective trains on: :mod:`stsreg.product.training.nli`; ``base`` is the
untouched backbone.

Pair rows take ``max_pairs`` pairs sampled with the seed; triple rows take as many triples, sampled from every
premise of the table that has both an entailment and a contradiction hypothesis (one triple per premise);
``simcse_unsup`` takes as many distinct sentences. So every row runs the same number of optimizer steps; a triple
step encodes 3 sentences per example, a pair step 2.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd
import torch

from stsreg.infra import public_tables
from stsreg.infra import atomic, runtime
from stsreg.infra.config import Params
from stsreg.product.model import SiameseRegressor, resolve_backbone
from stsreg.product.training.checkpoint import CheckpointPlan
from stsreg.product.training.nli import KINDS, train_encoder, training_examples
from stsreg.experiments.run_tables import COLUMNS, paired_table

log = logging.getLogger(__name__)

#: The row every other row is tested against (the paper's claim: Smooth K2 beats the other NLI objectives).
REFERENCE = "smooth_k2"

#: The paper's Table 1 (BERT-base, whole model trained on NLI only; Spearman x100), by our row name.
#: STS12 / 13 / 14 / 15 / 16 / STS-B / SICK-R / avg. Triplet and SimCSE rows are not in that table.
PAPER_TABLE1 = {
    "softmax": ("BERT + CE", (70.01, 71.18, 70.10, 78.37, 72.92, 74.88, 73.58, 73.01)),
    "l1": ("BERT + L1", (69.76, 69.56, 68.13, 76.33, 70.96, 73.61, 70.28, 71.23)),
    "mse": ("BERT + MSE", (72.38, 76.47, 74.35, 78.71, 72.95, 77.91, 70.67, 74.78)),
    "translated_relu": ("BERT + Translated ReLU", (72.51, 75.46, 72.34, 78.46, 72.64, 76.54, 72.02, 74.28)),
    "smooth_k2": ("BERT + Smooth K2", (72.39, 78.33, 75.28, 80.26, 74.52, 78.78, 72.65, 76.03)),
}
#: Sentence-BERT's own NLI row (softmax CE), quoted in the paper's Table 1.
SBERT_NLI = ("SBERT-base (softmax CE)", (70.97, 76.53, 73.19, 79.09, 74.30, 77.03, 72.91, 74.89))


def run_row(params: Params, name: str, seed: int, nli: pd.DataFrame, work: Path, log_metric=lambda k, v,
            s: None) -> Path:
    """Train row ``name`` with ``seed`` into ``work/model`` (returns it), or the backbone's path for ``base``."""
    if KINDS[name] is None:
        return Path(resolve_backbone(params.model.backbone))
    p = params.nli_table
    m = params.model
    torch.manual_seed(seed)  # the (unused) head's initialisation draws from the global RNG
    model = SiameseRegressor.from_params(m)
    model.token_cache = runtime.cache_dir("tokens")
    examples = training_examples(nli, KINDS[name], p.max_pairs, seed)
    work.mkdir(parents=True, exist_ok=True)
    plan = CheckpointPlan(work / "checkpoint.pt", every_steps=50, what=f"nli {name}")
    summary = train_encoder(model, name, examples, p, seed, plan, log_metric)
    with atomic.staged_dir(work / "model") as staged:
        model.save(staged)
    atomic.write_json(work / "nli_summary.json", summary)
    (work / "checkpoint.pt").unlink(missing_ok=True)
    return work / "model"


def format_table(table: pd.DataFrame, tests: pd.DataFrame | None, seeds, seconds: dict, backbone: str) -> str:
    """Markdown: our rows (7 tasks, avg7, avg7 unseen, wall time), the paper's Table 1 rows, the paired tests."""
    head = [public_tables.display(t) for t in (*public_tables.AVG7, "avg7")]
    fmt = lambda r, c: f"{r[c + '_mean']:.2f} ± {r[c + '_std']:.2f}" if r["seeds"] > 1 else f"{r[c + '_mean']:.2f}"
    lines = [f"Whole encoder trained on NLI only ({backbone!r}), one row per objective; Spearman x100 of cosine, "
             f"mean ± std over {len(seeds)} seed(s) {list(seeds)}. Wall time = training + 7-task evaluation of one "
             "seed on this machine.", "",
             "| objective | " + " | ".join(head) + " | avg7 unseen | avg7 95% CI | minutes |",
             "|---|" + "---:|" * (len(head) + 3)]
    for _, r in table.iterrows():
        minutes = seconds.get(r["method"], float("nan")) / 60
        lines.append(f"| {r['method']} | " + " | ".join(fmt(r, c) for c in COLUMNS) +
                     f" | [{r['avg7_low']:.2f}, {r['avg7_high']:.2f}] | {minutes:.1f} |")
    lines += ["", "The paper's Table 1 (BERT-base, whole model trained on full SNLI + MultiNLI for 1 epoch). Our "
                  "default backbone was already trained contrastively on sentence pairs, so absolute numbers are not "
                  "comparable "
                  "across the two tables; the order of the objectives is what the claim is about.", "",
              "| paper row | " + " | ".join(head) + " |", "|---|" + "---:|" * len(head),
              f"| {SBERT_NLI[0]} | " + " | ".join(f"{x:.2f}" for x in SBERT_NLI[1]) + " |"]
    lines += [f"| {label} (ours: {name}) | " + " | ".join(f"{x:.2f}" for x in values) + " |"
              for name, (label, values) in PAPER_TABLE1.items()]
    if tests is not None and not tests.empty:
        lines += ["", f"Paired bootstrap on the same test pairs: {REFERENCE} minus each row (one-sided p that "
                      f"{REFERENCE} "
                      "is better; per seed).", "",
                  *paired_table(tests)]
    return "\n".join(lines)

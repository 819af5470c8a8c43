"""The NLI-only table (the paper's Table 1 analogue): the whole encoder trained on NLI alone, one row per objective.

Every row starts from ``model.backbone``, trains ``nli_table.epochs`` over the same number of examples
(``nli_table.max_pairs``) with the same batch, lr, warm-up, clipping and max length, keeps the final weights (no
selection: the paper trains one epoch and scores what it gets), and is scored by the evaluation stage's 7 tasks
(cosine of pooled embeddings). What each objective trains on:

- ``softmax`` (SBERT-NLI): ``Linear(3d, 3)`` on ``[u, v, |u-v|]``, cross-entropy on labels 0/1/2
  (contradiction / neutral / entailment); the classifier is discarded at evaluation;
- ``mse``, ``l1``, ``translated_relu``, ``smooth_k2``: the paper's ``Linear(3d, 1)`` head regressed on the labels
  0/1/2 (gap 1; the buffered losses use ``x0`` = 0.25 <= 1/2, ``k`` = 2);
- ``triplet``: (premise, entailment, contradiction) triples, ``max(||a-p|| - ||a-n|| + margin, 0)`` with Euclidean
  distance (Sentence-BERT's triplet objective, torch's ``TripletMarginLoss``);
- ``simcse_sup``: the same triples, in-batch softmax over all positives and hard negatives (temperature 0.05);
- ``simcse_unsup``: distinct sentences of the sampled pairs, each passed twice (two dropout masks) as its own
  positive;
- ``base``: the untouched backbone (no training).

Pair rows take ``max_pairs`` pairs sampled with the seed; triple rows take as many triples, sampled from every
premise of the table that has both an entailment and a contradiction hypothesis (one triple per premise);
``simcse_unsup`` takes as many distinct sentences. So every row runs the same number of optimizer steps; a triple
step encodes 3 sentences per example, a pair step 2.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
from pathlib import Path

import pandas as pd
import torch
from torch import nn
from tqdm.auto import tqdm
from transformers import get_linear_schedule_with_warmup

from stsreg import atomic, runtime
from stsreg.config import NliTableParams, Params
from stsreg.losses import HEAD_LOSSES, InBatchContrastive, SoftmaxCE, build_head_loss
from stsreg.model import SiameseRegressor, pair_features
from stsreg.optim import param_groups
from stsreg.data.catalogue import sample_pairs

log = logging.getLogger(__name__)

#: What each row trains on (``None``: the untouched backbone).
KINDS: dict[str, str | None] = {"base": None, "softmax": "pair", "mse": "pair", "l1": "pair", "translated_relu": "pair",
                                "smooth_k2": "pair", "triplet": "triple", "simcse_sup": "triple",
                                "simcse_unsup": "sentence"}
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


def training_examples(nli: pd.DataFrame, kind: str, n: int, seed: int) -> pd.DataFrame:
    """The examples a row of ``kind`` trains on, from the NLI table (premise, hypothesis, label 0/1/2).

    ``pair``: ``n`` sampled pairs (premise, hypothesis, label); ``triple``: ``n`` sampled (anchor, positive,
    negative) = (premise, an entailment, a contradiction); ``sentence``: ``n`` distinct sentences of the ``n``
    sampled pairs (column ``sentence``). ``n`` = 0 takes everything."""
    if kind == "pair":
        return sample_pairs(nli[["premise", "hypothesis", "label"]], n, seed)
    if kind == "triple":
        first = lambda label: nli[nli.label == label].drop_duplicates("premise").set_index("premise").hypothesis  # noqa: E731
        both = pd.concat({"positive": first(2), "negative": first(0)}, axis=1, join="inner")
        triples = both.reset_index().rename(columns={"premise": "anchor"})
        return sample_pairs(triples, n, seed)
    if kind == "sentence":
        pairs = sample_pairs(nli, n, seed)
        unique = list(dict.fromkeys(list(pairs.premise) + list(pairs.hypothesis)))
        return sample_pairs(pd.DataFrame({"sentence": unique}), n, seed)
    raise ValueError(f"unknown example kind {kind!r}")


def tokenized_examples(model: SiameseRegressor, examples: pd.DataFrame) -> tuple[dict, torch.Tensor | None]:
    """Examples -> (a token table per text column, tokenized once: every epoch and a resumed run pad batches from
    them; the (n,) NLI labels 0/1/2, or None for the objectives without labels)."""
    tables = {col: model.pretokenize(examples[col].tolist()) for col in examples.columns if col != "label"}
    return tables, torch.tensor(examples.label.to_numpy()) if "label" in examples else None


class RowObjective(nn.Module):
    """One row's loss on a batch of examples (rows of :func:`training_examples`); owns any trained classifier.

    Label range: NLI labels 0/1/2 for the pair objectives; the triple and sentence objectives take no labels."""

    def __init__(self, name: str, dim: int, p: NliTableParams):
        super().__init__()
        self.name, self.kind = name, KINDS[name]
        if name == "softmax":
            self.loss = SoftmaxCE(dim, 3)
        elif name in HEAD_LOSSES:
            self.loss = build_head_loss(name, p.x0, p.k)
        elif name == "triplet":
            self.loss = nn.TripletMarginLoss(margin=p.margin, p=2)
        elif name in ("simcse_sup", "simcse_unsup"):
            self.loss = InBatchContrastive(p.temperature)
        else:
            raise ValueError(f"{name!r} trains nothing")

    def forward(self, model: SiameseRegressor, tables: dict, labels: torch.Tensor, idx: list[int]) -> torch.Tensor:
        """The loss of rows ``idx``: ``tables`` maps each text column to its token table (tokenized once,
        :meth:`SiameseRegressor.pretokenize`); ``labels``: (n,) NLI labels 0/1/2 of every row (pair objectives)."""
        device = model.device
        embed = lambda col: model.embed(model.collate(tables[col], idx))  # noqa: E731
        if self.kind == "pair":
            u, v = embed("premise"), embed("hypothesis")
            labels = labels[idx].to(device)
            if self.name == "softmax":
                return self.loss(pair_features(u, v), labels)
            return self.loss(model.score_embeddings(u, v), labels.float())
        if self.kind == "triple":
            a, pos, neg = embed("anchor"), embed("positive"), embed("negative")
            return self.loss(a, pos, neg)
        u, v = embed("sentence"), embed("sentence")  # the same sentences twice: two dropout masks
        return self.loss(u, v)


def _optimizer(model: SiameseRegressor, objective: RowObjective, p: NliTableParams, total_steps: int):
    """AdamW (no decay on bias / norm weights) over the encoder, the head and the objective's own classifier; linear
    warm-up then decay (transformers' schedule)."""
    groups = param_groups(model, p.lr, p.weight_decay, 1.0)
    own = [q for q in objective.parameters() if q.requires_grad]
    if own:
        groups.append({"params": own, "lr": p.lr, "weight_decay": p.weight_decay})
    opt = torch.optim.AdamW(groups, lr=p.lr)
    return opt, get_linear_schedule_with_warmup(opt, int(round(p.warmup_ratio * total_steps)), total_steps)


def train_row(model: SiameseRegressor, name: str, examples: pd.DataFrame, p: NliTableParams, seed: int,
              ckpt_path: Path, log_metric=lambda key, value, step: None, checkpoint_every: int = 50) -> dict:
    """Train ``model`` (in place) with objective ``name`` on ``examples`` for ``p.epochs``; returns a summary.

    Resumable: every ``checkpoint_every`` steps the weights, optimizer, schedule, torch RNG state and step go to
    ``ckpt_path`` (atomically); a rerun with a checkpoint continues from it and ends with the same weights. The
    batch order comes from a generator seeded per epoch, so it does not depend on where a run was resumed."""
    torch.manual_seed(seed)
    objective = RowObjective(name, model.dim, p)
    steps_per_epoch = math.ceil(len(examples) / p.batch_size)
    total = steps_per_epoch * p.epochs
    model.train()
    model.encoder.requires_grad_(True)
    for pname, param in model.encoder.named_parameters():
        if pname.startswith("pooler."):  # unused by mean / CLS-hidden pooling
            param.requires_grad_(False)
    model.head.requires_grad_(name in HEAD_LOSSES)
    opt, sched = _optimizer(model, objective, p, total)
    step, losses = 0, []
    if ckpt_path.exists():
        ckpt = torch.load(ckpt_path, map_location="cpu", weights_only=False)
        model.load_state_dict(ckpt["model"])
        objective.load_state_dict(ckpt["objective"])
        opt.load_state_dict(ckpt["optimizer"])
        sched.load_state_dict(ckpt["scheduler"])
        torch.set_rng_state(ckpt["rng"])
        step, losses = ckpt["step"], ckpt["losses"]
        log.info("resuming %s from step %d of %d", name, step, total)
    params = [q for g in opt.param_groups for q in g["params"]]
    tables, labels = tokenized_examples(model, examples)
    bar = tqdm(total=total, initial=step, desc=f"nli-table {name}", unit="step", disable=None)
    for epoch in range(step // steps_per_epoch, p.epochs):
        order = torch.randperm(len(examples), generator=torch.Generator().manual_seed(seed + epoch)).tolist()
        for b in range(step - epoch * steps_per_epoch, steps_per_epoch):
            loss = objective(model, tables, labels, order[b * p.batch_size:(b + 1) * p.batch_size])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, p.max_grad_norm)
            opt.step()
            sched.step()
            step += 1
            losses.append(loss.item())
            log_metric("train_loss", losses[-1], step)
            bar.update(1)
            if step % checkpoint_every == 0 or step == total:
                tmp = ckpt_path.with_suffix(".tmp")
                torch.save({"model": model.state_dict(), "objective": objective.state_dict(), "optimizer": opt.state_dict(),
                            "scheduler": sched.state_dict(), "rng": torch.get_rng_state(), "step": step, "losses": losses}, tmp)
                os.replace(tmp, ckpt_path)
    bar.close()
    model.eval()
    tail = losses[-max(1, steps_per_epoch // 10):]
    return {"objective": name, "examples": len(examples), "steps": step, "total_steps": total,
            "first_loss": losses[0] if losses else None, "final_loss_mean_last_10pct": sum(tail) / len(tail) if tail else None,
            "params": dataclasses.asdict(p), "seed": seed}


def run_row(params: Params, name: str, seed: int, nli: pd.DataFrame, work: Path, log_metric=lambda k, v, s: None) -> Path:
    """Train row ``name`` with ``seed`` into ``work/model`` (returns it), or the backbone's path for ``base``."""
    from stsreg.model import resolve_backbone

    if KINDS[name] is None:
        return Path(resolve_backbone(params.model.backbone))
    p = params.nli_table
    m = params.model
    torch.manual_seed(seed)  # the (unused) head's initialisation draws from the global RNG
    model = SiameseRegressor.from_params(m)
    model.token_cache = runtime.cache_dir("tokens")
    examples = training_examples(nli, KINDS[name], p.max_pairs, seed)
    work.mkdir(parents=True, exist_ok=True)
    summary = train_row(model, name, examples, p, seed, work / "checkpoint.pt", log_metric)
    with atomic.staged_dir(work / "model") as staged:
        model.save(staged)
    atomic.write_json(work / "nli_summary.json", summary)
    (work / "checkpoint.pt").unlink(missing_ok=True)
    return work / "model"


def format_table(table: pd.DataFrame, tests: pd.DataFrame | None, seeds, seconds: dict, backbone: str) -> str:
    """Markdown: our rows (7 tasks, avg7, avg7 unseen, wall time), the paper's Table 1 rows, the paired tests."""
    from stsreg.runtable import COLUMNS
    from stsreg.report import paired_table

    head = ["STS12", "STS13", "STS14", "STS15", "STS16", "STS-B", "SICK-R", "avg7"]
    fmt = lambda r, c: f"{r[c + '_mean']:.2f} ± {r[c + '_std']:.2f}" if r["seeds"] > 1 else f"{r[c + '_mean']:.2f}"  # noqa: E731
    lines = [f"Whole encoder trained on NLI only ({backbone!r}), one row per objective; Spearman x100 of cosine, "
             f"mean ± std over {len(seeds)} seed(s) {list(seeds)}. Wall time = training + 7-task evaluation of one "
             "seed on this machine.", "",
             "| objective | " + " | ".join(head) + " | avg7 unseen | avg7 95% CI | minutes |",
             "|---|" + "---:|" * (len(head) + 3)]
    for _, r in table.iterrows():
        minutes = seconds.get(r["method"], float("nan")) / 60
        lines.append(f"| {r['method']} | " + " | ".join(fmt(r, c) for c in COLUMNS) +
                     f" | [{r['avg7_low']:.2f}, {r['avg7_high']:.2f}] | {minutes:.1f} |")
    lines += ["", "The paper's Table 1 (BERT-base, whole model trained on full SNLI + MultiNLI for 1 epoch). Our default "
                  "backbone was already trained contrastively on sentence pairs, so absolute numbers are not comparable "
                  "across the two tables; the order of the objectives is what the claim is about.", "",
              "| paper row | " + " | ".join(head) + " |", "|---|" + "---:|" * len(head),
              f"| {SBERT_NLI[0]} | " + " | ".join(f"{x:.2f}" for x in SBERT_NLI[1]) + " |"]
    lines += [f"| {label} (ours: {name}) | " + " | ".join(f"{x:.2f}" for x in values) + " |"
              for name, (label, values) in PAPER_TABLE1.items()]
    if tests is not None and not tests.empty:
        lines += ["", f"Paired bootstrap on the same test pairs: {REFERENCE} minus each row (one-sided p that {REFERENCE} "
                      "is better; per seed).", "",
                  *paired_table(tests)]
    return "\n".join(lines)

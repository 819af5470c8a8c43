"""The whole encoder trained on NLI with one objective: the NLI table's rows and stage 1's optional encoder step.

What each objective trains on (:data:`KINDS`):

- ``softmax`` (SBERT-NLI): ``Linear(3d, 3)`` on ``[u, v, |u-v|]``, cross-entropy on labels 0/1/2
  (contradiction / neutral / entailment); the classifier is discarded afterwards;
- ``mse``, ``l1``, ``translated_relu``, ``smooth_k2``: the paper's ``Linear(3d, 1)`` head regressed on the labels
  0/1/2 (gap 1; the buffered losses use ``x0`` = 0.25 <= 1/2, ``k`` = 2);
- ``triplet``: (premise, entailment, contradiction) triples, ``max(||a-p|| - ||a-n|| + margin, 0)`` with Euclidean
  distance (Sentence-BERT's triplet objective, torch's ``TripletMarginLoss``);
- ``simcse_sup``: the same triples, in-batch softmax over all positives and hard negatives (temperature 0.05);
- ``simcse_unsup``: distinct sentences of the sampled pairs, each passed twice (two dropout masks) as its own
  positive.

Training keeps the final weights (no selection: the paper trains one epoch and scores what it gets) and is
resumable from its checkpoint. The encoder runs in the model's precision (``model.precision``: bf16 autocast where it
resolves to it, :mod:`stsreg.product.precision`), the embeddings, losses, weights and optimizer in fp32, as in stage 2,
through the same loop (:func:`stsreg.product.training.resumable.run_steps`);
with ``group_by_length`` each epoch's batches hold examples of similar token length (less padding).
"""

from __future__ import annotations

import dataclasses
import logging

import pandas as pd
import torch
from torch import nn
from transformers import get_linear_schedule_with_warmup

from stsreg.product import precision, tokens
from stsreg.infra.config import NliTrainingParams
from stsreg.product.data.catalogue import sample_pairs
from stsreg.infra.errors import InputError
from stsreg.infra.method_specs import NLI
from stsreg.infra.loss_specs import HEAD_LOSSES
from stsreg.product.losses import InBatchContrastive, SoftmaxCE
from stsreg.product.losses import head_loss
from stsreg.product.model import SiameseRegressor, pair_features
from stsreg.product.optim import optimizer_step, param_groups
from stsreg.product.training.checkpoint import Checkpoint, CheckpointPlan
from stsreg.product.training.resumable import Batches, run_steps

log = logging.getLogger(__name__)

#: What each objective trains on (``None``: nothing, the untouched backbone), from the declared rows
#: (:data:`stsreg.infra.method_specs.NLI`).
KINDS: dict[str, str | None] = {o.name: o.kind for o in NLI.values()}


def training_examples(nli: pd.DataFrame, kind: str, n: int, seed: int) -> pd.DataFrame:
    """The examples a row of ``kind`` trains on, from the NLI table (premise, hypothesis, label 0/1/2).

    ``pair``: ``n`` sampled pairs (premise, hypothesis, label); ``triple``: ``n`` sampled (anchor, positive,
    negative) = (premise, an entailment, a contradiction); ``sentence``: ``n`` distinct sentences of the ``n``
    sampled pairs (column ``sentence``). ``n`` = 0 takes everything. No example at all is an :class:`InputError`
    (a table without one premise that has both an entailment and a contradiction has no triple)."""
    if kind == "pair":
        examples = sample_pairs(nli[["premise", "hypothesis", "label"]], n, seed)
    elif kind == "triple":
        first = lambda label: nli[nli.label == label].drop_duplicates("premise").set_index("premise").hypothesis
        both = pd.concat({"positive": first(2), "negative": first(0)}, axis=1, join="inner")
        triples = both.reset_index().rename(columns={"premise": "anchor"})
        examples = sample_pairs(triples, n, seed)
    elif kind == "sentence":
        pairs = sample_pairs(nli, n, seed)
        unique = list(dict.fromkeys(list(pairs.premise) + list(pairs.hypothesis)))
        examples = sample_pairs(pd.DataFrame({"sentence": unique}), n, seed)
    else:
        raise ValueError(f"unknown example kind {kind!r}")
    if examples.empty:
        need = " (a premise with both an entailment and a contradiction hypothesis)" if kind == "triple" else ""
        raise InputError(f"the NLI table ({len(nli)} rows) yields no {kind} example{need} to train on")
    return examples


def example_lengths(tables: dict) -> list[int]:
    """Tokens of each example's longest text (what its batch pads to), from :func:`tokenized_examples`' tables."""
    return [max(row) for row in zip(*(tokens.lengths(table) for table in tables.values()))]


def tokenized_examples(model: SiameseRegressor, examples: pd.DataFrame) -> tuple[dict, torch.Tensor | None]:
    """Examples -> (a token table per text column, tokenized once: every epoch and a resumed run pad batches from
    them; the (n,) NLI labels 0/1/2, or None for the objectives without labels)."""
    tables = {col: model.pretokenize(examples[col].tolist()) for col in examples.columns if col != "label"}
    return tables, torch.tensor(examples.label.to_numpy()) if "label" in examples else None


class NliObjective(nn.Module):
    """One objective's loss on a batch of examples (rows of :func:`training_examples`); owns any trained classifier.

    Label range: NLI labels 0/1/2 for the pair objectives; the triple and sentence objectives take no labels."""

    def __init__(self, name: str, dim: int, p: NliTrainingParams):
        super().__init__()
        self.name, self.kind = name, KINDS[name]
        if name == "softmax":
            self.loss = SoftmaxCE(dim, 3)
        elif name in HEAD_LOSSES:
            self.loss = head_loss(name, p.x0, p.k)
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

        def embed(col: str) -> torch.Tensor:  # the encoder in the model's precision, what follows in fp32
            with model.autocast():
                return model.embed(model.collate(tables[col], idx)).float()

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


def _optimizer(model: SiameseRegressor, objective: NliObjective, p: NliTrainingParams, total_steps: int):
    """AdamW (no decay on bias / norm weights) over the encoder, the head and the objective's own classifier; linear
    warm-up then decay (transformers' schedule)."""
    groups = param_groups(model, p.lr, p.weight_decay, 1.0)
    own = [q for q in objective.parameters() if q.requires_grad]
    if own:
        groups.append({"params": own, "lr": p.lr, "weight_decay": p.weight_decay})
    opt = torch.optim.AdamW(groups, lr=p.lr)
    return opt, get_linear_schedule_with_warmup(opt, int(round(p.warmup_ratio * total_steps)), total_steps)


def train_encoder(model: SiameseRegressor, name: str, examples: pd.DataFrame, p: NliTrainingParams, seed: int,
                  plan: CheckpointPlan, log_metric=lambda key, value, step: None) -> dict:
    """Train ``model`` (in place) with objective ``name`` on ``examples`` for ``p.epochs``; returns a summary.

    Resumable (:func:`stsreg.product.training.resumable.run_steps`): the weights, optimizer, schedule, RNG states and
    losses go to ``plan.path`` as the plan says; a rerun with the checkpoint continues from it and ends with the same
    weights."""
    torch.manual_seed(seed)
    objective = NliObjective(name, model.dim, p)
    amp_name = precision.describe(model.amp_dtype)  # resolved (auto: probed) before training touches the weights
    model.train()
    model.encoder.requires_grad_(True)
    for pname, param in model.encoder.named_parameters():
        if pname.startswith("pooler."):  # unused by mean / CLS-hidden pooling
            param.requires_grad_(False)
    model.head.requires_grad_(name in HEAD_LOSSES)
    tables, labels = tokenized_examples(model, examples)
    batches = Batches(len(examples), p.batch_size, p.epochs, seed, example_lengths(tables) if p.group_by_length
                      else None)
    opt, sched = _optimizer(model, objective, p, batches.total)
    state: dict = {"step": 0, "losses": []}
    ckpt = Checkpoint(plan, {"model": model, "objective": objective, "optimizer": opt, "scheduler": sched}, state)
    ckpt.resume()
    params = [q for g in opt.param_groups for q in g["params"]]

    def take(idx: list[int], step: int) -> None:
        loss = objective(model, tables, labels, idx)
        optimizer_step(loss, opt, params, p.max_grad_norm, sched)
        state["losses"].append(loss.item())
        log_metric("train_loss", state["losses"][-1], step)

    step = run_steps(batches, take, ckpt, f"nli {name}")
    model.eval()
    losses = state["losses"]
    tail = losses[-max(1, batches.per_epoch // 10):]
    return {"objective": name, "examples": len(examples), "steps": step, "total_steps": batches.total,
            "first_loss": losses[0] if losses else None,
            "final_loss_mean_last_10pct": sum(tail) / len(tail) if tail else None,
            "params": dataclasses.asdict(p), "seed": seed, "precision": amp_name}

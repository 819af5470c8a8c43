"""Losses, one small class each. ``forward`` takes predictions and labels, returns a scalar (batch mean).
:func:`build_loss` builds the one a ``stage2.loss`` name declares (:mod:`stsreg.infra.loss_specs`), :func:`head_loss` a
loss on the head alone with a stage's own buffer settings (stage 1, the NLI table).

Regression losses act on the head's scalar output ``pred`` of shape ``(batch,)`` against ``labels`` of
shape ``(batch,)`` on the *label scale of the data*: NLI contradiction/neutral/entailment = 0/1/2 (gap d=1),
STS-B 0-5, SICK-R 1-5. The buffer ``x0`` must satisfy ``x0 <= d/2`` for the paper's argument to hold.

Options from the authors' code, off by default: ``zero_negative`` (predictions below 0 give no loss and no
gradient) and, in the data pipeline, rounding STS labels to integers.
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn

from stsreg.infra.loss_specs import HEAD_LOSSES, LOSSES


def _buffer(pred: torch.Tensor, labels: torch.Tensor, x0: float, zero_negative: bool) -> tuple[torch.Tensor,
                                                                                               torch.Tensor]:
    """x = |pred - label| and the mask of elements that contribute (outside the buffer)."""
    x = (pred - labels.to(pred.dtype)).abs()
    active = x >= x0
    if zero_negative:
        active = active & (pred >= 0)
    return x, active


class _BufferLoss(nn.Module):
    """Shared knobs of the buffered losses: threshold ``x0``, slope ``k``, ``zero_negative`` option (their defaults are
    the settings' own: :mod:`stsreg.infra.loss_specs` for stage 2, ``stage1`` / ``nli_table`` for the NLI head)."""

    #: what it is computed from (:class:`stsreg.product.objective.Objective` hands over these): the head's score
    reads = ("score", "labels")

    def __init__(self, x0: float, k: float, zero_negative: bool = False):
        super().__init__()
        self.x0, self.k, self.zero_negative = x0, k, zero_negative

    def get_config_dict(self) -> dict:
        return {"x0": self.x0, "k": self.k, "zero_negative": self.zero_negative}


class TranslatedReLU(_BufferLoss):
    """``L = k * max(0, |pred - label| - x0)``; gradient 0 inside the buffer, ±k outside.

    pred, labels: (batch,) on the data's label scale (NLI 0/1/2; STS-B 0-5; SICK-R 1-5).
    """

    def forward(self, pred: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        x, active = _buffer(pred, labels, self.x0, self.zero_negative)
        return (self.k * (x - self.x0) * active).mean()


class SmoothK2(_BufferLoss):
    """``L = k * (|pred - label| - x0)^2`` outside the buffer, 0 inside; gradient ``2k(x - x0)``, continuous at x0.

    pred, labels: (batch,) on the data's label scale (NLI 0/1/2; STS-B 0-5; SICK-R 1-5).
    """

    def forward(self, pred: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        x, active = _buffer(pred, labels, self.x0, self.zero_negative)
        return (self.k * (x - self.x0).pow(2) * active).mean()


class MSE(nn.Module):
    """Mean squared error on the head output. pred, labels: (batch,), any label scale."""

    #: what it is computed from: the head's score
    reads = ("score", "labels")

    def forward(self, pred: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return F.mse_loss(pred, labels.to(pred.dtype))

    def get_config_dict(self) -> dict:
        return {}


class L1(nn.Module):
    """Mean absolute error on the head output. pred, labels: (batch,), any label scale."""

    #: what it is computed from: the head's score
    reads = ("score", "labels")

    def forward(self, pred: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return F.l1_loss(pred, labels.to(pred.dtype))

    def get_config_dict(self) -> dict:
        return {}


class SoftmaxCE(nn.Module):
    """SBERT's classifier objective (the paper's CE row): ``Linear(3d, n_classes)`` on ``[u, v, |u-v|]``.

    Takes ``features`` (batch, 3d) and integer ``labels`` (batch,) in {0, 1, 2} (NLI). Owns its classifier,
    which is trained with the encoder and discarded at evaluation (cosine is used).
    """

    def __init__(self, dim: int, n_classes: int = 3):
        super().__init__()
        self.classifier = nn.Linear(3 * dim, n_classes)

    def forward(self, features: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(self.classifier(features), labels.long())

    def get_config_dict(self) -> dict:
        return {"n_classes": self.classifier.out_features}


class CosineMSE(nn.Module):
    """SBERT's regression objective: MSE between ``cos(u, v)`` and the label mapped to [0, 1].

    u, v: (batch, d); labels: (batch,) on [lo, hi] (STS-B 0-5, SICK-R 1-5), scaled by ``(y - lo) / (hi - lo)``.
    """

    #: what it is computed from: the two embeddings
    reads = ("u", "v", "labels")

    def __init__(self, lo: float = 0.0, hi: float = 5.0):
        super().__init__()
        self.lo, self.hi = lo, hi

    def forward(self, u: torch.Tensor, v: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        target = (labels.to(u.dtype) - self.lo) / (self.hi - self.lo)
        return F.mse_loss(F.cosine_similarity(u, v), target)

    def get_config_dict(self) -> dict:
        return {"lo": self.lo, "hi": self.hi}


class CoSENT(nn.Module):
    """CoSENT: ``log(1 + sum_{s_i > s_j} exp(scale * (cos_j - cos_i)))``; only the label *order* matters.

    u, v: (batch, d); labels: (batch,) any scale (higher = more similar).
    """

    #: what it is computed from: the two embeddings
    reads = ("u", "v", "labels")

    def __init__(self, scale: float = 20.0):
        super().__init__()
        self.scale = scale

    def forward(self, u: torch.Tensor, v: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        cos = F.cosine_similarity(u, v) * self.scale
        diff = cos[None, :] - cos[:, None]                    # diff[i, j] = cos_j - cos_i
        mask = labels[:, None] > labels[None, :]              # pairs with label_i > label_j
        diff = diff - (~mask).to(diff.dtype) * 1e12           # exclude the others
        return torch.logsumexp(torch.cat([torch.zeros(1, dtype=diff.dtype, device=diff.device), diff.flatten()]), dim=0)

    def get_config_dict(self) -> dict:
        return {"scale": self.scale}


class InBatchContrastive(nn.Module):
    """Supervised SimCSE / multiple-negatives ranking: anchor ``u_i`` must pick its positive ``v_i``
    among all positives (and optional hard negatives ``h``) of the batch.

    u, v: (batch, d) anchors and positives; h: optional (batch, d) hard negatives. No labels: build pairs
    from data whose score is above a threshold (the "+Contrast" baseline). ``temperature`` 0.05 = scale 20.
    ``contrastive_min_label``: which scored pairs count as positives (stage 2 keeps those scoring at least this;
    None where the data gives the pairs, as NLI's entailments).
    """

    #: what it is computed from: the two embeddings of positive pairs, no label
    reads = ("u", "v")

    def __init__(self, temperature: float = 0.05, contrastive_min_label: float | None = None):
        super().__init__()
        self.temperature, self.min_label = temperature, contrastive_min_label

    def forward(self, u: torch.Tensor, v: torch.Tensor, h: torch.Tensor | None = None) -> torch.Tensor:
        candidates = v if h is None else torch.cat([v, h], dim=0)
        sim = F.normalize(u, dim=-1) @ F.normalize(candidates, dim=-1).T / self.temperature  # (batch, batch[+batch])
        return F.cross_entropy(sim, torch.arange(u.shape[0], device=u.device))

    def get_config_dict(self) -> dict:
        return {"temperature": self.temperature}


class AffineCosine(nn.Module):
    """A buffered loss on the score the protocol uses: ``base(a * cos(u, v) + b, labels)``.

    u, v: (batch, d); labels: (batch,) on the data's label scale (STS-B 0-5, SICK-R 1-5). ``a`` and ``b`` map the
    cosine range [-1, 1] onto [b - a, b + a] (default a=5, b=0: cosine 1 -> 5, cosine 0 -> 0), so ``x0`` and ``k``
    keep their meaning on the label scale (``x0 <= d/2`` with d = 1 between integer STS labels). The gradient
    reaches the encoder through the cosine; there is no head.
    """

    #: what it is computed from: the two embeddings
    reads = ("u", "v", "labels")

    def __init__(self, base: _BufferLoss, cos_a: float, cos_b: float):
        super().__init__()
        self.base, self.a, self.b = base, cos_a, cos_b

    def forward(self, u: torch.Tensor, v: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return self.base(self.a * F.cosine_similarity(u, v) + self.b, labels)

    def get_config_dict(self) -> dict:
        return {**self.base.get_config_dict(), "a": self.a, "b": self.b}


class Joint(nn.Module):
    """The paper's head loss plus a buffered loss on the cosine: ``head(score, y) + lam * cosine(u, v, y)``.

    score: (batch,) head output; u, v: (batch, d); labels: (batch,) on the data's label scale (STS-B 0-5,
    SICK-R 1-5). Both terms use the same buffer ``x0`` and slope ``k`` on that scale: ``head`` and a copy of it on
    the cosine map ``[cos_a, cos_b]``.
    """

    #: what it is computed from: the embeddings and the head's score
    reads = ("u", "v", "score", "labels")

    def __init__(self, head: _BufferLoss, cos_a: float, cos_b: float, joint_lambda: float):
        super().__init__()
        self.head, self.cosine, self.lam = head, AffineCosine(copy.deepcopy(head), cos_a, cos_b), joint_lambda

    def forward(self, u: torch.Tensor, v: torch.Tensor, score: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return self.head(score, labels) + self.lam * self.cosine(u, v, labels)

    def get_config_dict(self) -> dict:
        return {"head": self.head.get_config_dict(), "cosine": self.cosine.get_config_dict(), "lambda": self.lam}


class CoSENTPlusCosine(nn.Module):
    """CoSENT's ranking term plus a buffered loss on the cosine: ``cosent(u, v, y) + lam * cosine(u, v, y)``.

    u, v: (batch, d); labels: (batch,) on the data's label scale (STS-B 0-5, SICK-R 1-5). CoSENT reads only the
    label order; the buffered term (``base`` on the cosine map ``[cos_a, cos_b]``, :class:`AffineCosine`) pins the
    cosine to the label scale outside its buffer.
    """

    #: what it is computed from: the two embeddings
    reads = ("u", "v", "labels")

    def __init__(self, base: _BufferLoss, cos_a: float, cos_b: float, joint_lambda: float):
        super().__init__()
        self.cosent, self.cosine, self.lam = CoSENT(), AffineCosine(base, cos_a, cos_b), joint_lambda

    def forward(self, u: torch.Tensor, v: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return self.cosent(u, v, labels) + self.lam * self.cosine(u, v, labels)

    def get_config_dict(self) -> dict:
        return {"cosent": self.cosent.get_config_dict(), "cosine": self.cosine.get_config_dict(), "lambda": self.lam}


def build_loss(name: str, **values) -> nn.Module:
    """The module of the loss ``name`` declares (:data:`stsreg.infra.loss_specs.LOSSES`): its class built with the loss
    it wraps first (when it wraps one) and its own knobs by name, each from ``values`` or the knob's default."""
    if name not in LOSSES:
        raise ValueError(f"unknown loss {name!r}; choose from {sorted(LOSSES)}")
    spec = LOSSES[name]
    unknown = set(values) - set(spec.knobs())
    if unknown:
        raise ValueError(f"loss {name!r} reads no {sorted(unknown)}; it reads {sorted(spec.knobs())}")
    own = {k.name: values.get(k.name, k.default) for k in spec.knobs_own}
    base = {k: v for k, v in values.items() if spec.base and k in LOSSES[spec.base].knobs()}
    cls = globals()[spec.cls]
    return cls(build_loss(spec.base, **base), **own) if spec.base else cls(**own)


def head_loss(name: str, x0: float, k: float, zero_negative: bool = False) -> nn.Module:
    """A loss on the head output alone (a ``head`` loss of :data:`~stsreg.infra.loss_specs.LOSSES`: ``smooth_k2``,
    ``translated_relu``, ``mse``, ``l1``) with the buffer settings of the stage that trains it (stage 1 and the NLI
    table on the 0/1/2 scale); a loss that has no buffer ignores them."""
    if name not in HEAD_LOSSES:
        raise ValueError(f"unknown head loss {name!r}; choose from {sorted(HEAD_LOSSES)}")
    given = {"x0": x0, "k": k, "zero_negative": zero_negative}
    return build_loss(name, **{key: value for key, value in given.items() if key in LOSSES[name].knobs()})

"""The stage-2 objective: which loss a ``stage2.loss`` name means and what it reads from the model.

Names (``config.STAGE2_LOSSES`` lists the same set): the head losses of :mod:`stsreg.product.losses` (``smooth_k2``,
``translated_relu``, ``mse``, ``l1``), the pair losses on the cosine (``cosent``, ``cosine_mse``), the buffered losses
on an affine map of the cosine (``smooth_k2_cos``, ``translated_relu_cos``), the joint head + cosine objectives
(``joint_smooth_k2``, ``joint_translated_relu``) and in-batch ``contrastive``.
"""

from __future__ import annotations

import torch
from torch import nn

from stsreg.product.losses import (
    HEAD_LOSSES,
    AffineCosine,
    CoSENT,
    CoSENTPlusCosine,
    CosineMSE,
    InBatchContrastive,
    Joint,
    SmoothK2,
    TranslatedReLU,
    build_head_loss,
)

#: Buffered losses on ``a * cos(u, v) + b`` (no head), and the joint ``head + lambda * cosine`` objectives.
COSINE_BUFFER_LOSSES = {"smooth_k2_cos": SmoothK2, "translated_relu_cos": TranslatedReLU}
JOINT_LOSSES = {"joint_smooth_k2": SmoothK2, "joint_translated_relu": TranslatedReLU}
#: CoSENT plus ``joint_lambda`` times a buffered loss on ``a * cos(u, v) + b`` (no head).
COSENT_BUFFER_LOSSES = {"cosent_smooth_k2_cos": SmoothK2, "cosent_translated_relu_cos": TranslatedReLU}

PAIR_LOSSES = {"cosent": CoSENT, "cosine_mse": CosineMSE}
STAGE2_LOSSES = (*HEAD_LOSSES, *PAIR_LOSSES, "contrastive", *COSINE_BUFFER_LOSSES, *JOINT_LOSSES, *COSENT_BUFFER_LOSSES)


class Objective(nn.Module):
    """What stage 2 minimises, from the model's ``(u, v, score)`` and the labels. ``kind`` says what it reads:

    - ``head``: a head loss on ``score`` (batch,) vs labels on the data's scale (the paper's method);
    - ``pair``: CoSENT / CosineMSE on ``cos(u, v)`` (labels 0-5); the head is unused and frozen;
    - ``cosine``: Translated ReLU / Smooth K2 on ``cos_a * cos(u, v) + cos_b`` (:class:`AffineCosine`); head frozen;
    - ``cosine`` also holds CoSENT + ``joint_lambda`` times a cosine-buffered loss (:class:`CoSENTPlusCosine`);
    - ``joint``: the head loss plus ``joint_lambda`` times the same loss on the cosine (:class:`Joint`);
    - ``contrastive``: in-batch contrastive on ``(u, v)`` of positive pairs only (the "+Contrast" baseline);
      :attr:`min_label` says which training pairs count as positives.
    """

    def __init__(self, name: str, x0: float = 0.2, k: float = 3.0, zero_negative: bool = False,
                 temperature: float = 0.05, min_label: float = 4.0, cos_a: float = 5.0, cos_b: float = 0.0,
                 joint_lambda: float = 1.0):
        super().__init__()
        if name not in STAGE2_LOSSES:
            raise ValueError(f"unknown stage-2 loss {name!r}; choose from {sorted(STAGE2_LOSSES)}")
        self.name, self.min_label = name, min_label
        if name in HEAD_LOSSES:
            self.kind, self.loss = "head", build_head_loss(name, x0, k, zero_negative)
        elif name in PAIR_LOSSES:
            self.kind, self.loss = "pair", PAIR_LOSSES[name]()
        elif name in COSINE_BUFFER_LOSSES:
            base = COSINE_BUFFER_LOSSES[name](x0=x0, k=k, zero_negative=zero_negative)
            self.kind, self.loss = "cosine", AffineCosine(base, cos_a, cos_b)
        elif name in COSENT_BUFFER_LOSSES:
            cosine = AffineCosine(COSENT_BUFFER_LOSSES[name](x0=x0, k=k, zero_negative=zero_negative), cos_a, cos_b)
            self.kind, self.loss = "cosine", CoSENTPlusCosine(CoSENT(), cosine, joint_lambda)
        elif name in JOINT_LOSSES:
            cls = JOINT_LOSSES[name]
            cosine = AffineCosine(cls(x0=x0, k=k, zero_negative=zero_negative), cos_a, cos_b)
            self.kind, self.loss = "joint", Joint(cls(x0=x0, k=k, zero_negative=zero_negative), cosine, joint_lambda)
        else:
            self.kind, self.loss = "contrastive", InBatchContrastive(temperature)

    @classmethod
    def from_params(cls, p) -> "Objective":
        """The objective a :class:`~stsreg.infra.config.Stage2Params` names (``loss`` with its ``x0``, ``k``, ... )."""
        return cls(p.loss, p.x0, p.k, p.zero_negative, p.temperature, p.contrastive_min_label, p.cos_a, p.cos_b,
                   p.joint_lambda)

    @property
    def score_map(self) -> list[float] | None:
        """The served score after training with this objective (:meth:`SiameseRegressor.predict`): None = the head
        (head losses train it); ``[cos_a, cos_b]`` for the cosine-buffer and joint losses (the map they train);
        ``[5, 0]`` for the other encoder objectives (cosine MSE trains cos ~ label / 5; CoSENT and contrastive train
        no scale, so that map is only monotone, not calibrated), whose training leaves the head stale."""
        if self.kind == "head":
            return None
        if self.kind in ("cosine", "joint"):
            cosine = self.loss if isinstance(self.loss, AffineCosine) else self.loss.cosine
            return [float(cosine.a), float(cosine.b)]
        return [5.0, 0.0]

    def forward(self, u: torch.Tensor, v: torch.Tensor, score: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        if self.kind == "head":
            return self.loss(score, labels)
        if self.kind in ("pair", "cosine"):
            return self.loss(u, v, labels)
        if self.kind == "joint":
            return self.loss(u, v, score, labels)
        return self.loss(u, v)


"""The stage-2 objective: the loss a ``stage2.loss`` name means (:data:`stsreg.infra.loss_specs.LOSSES` declares each
name's kind and base loss) and what it reads from the model."""

from __future__ import annotations

import torch
from torch import nn

from stsreg.infra.loss_specs import LOSSES
from stsreg.product.losses import AffineCosine, build_loss


class Objective(nn.Module):
    """What stage 2 minimises, from the model's ``(u, v, score)`` and the labels: the loss takes what its ``reads``
    declares. ``kind`` says what it trains (which parts of the model, which training pairs):

    - ``head``: a head loss on ``score`` (batch,) vs labels on the data's scale (the paper's method);
    - ``pair``: CoSENT / CosineMSE on ``cos(u, v)`` (labels 0-5); the head is unused and frozen;
    - ``cosine``: Translated ReLU / Smooth K2 on ``cos_a * cos(u, v) + cos_b`` (:class:`AffineCosine`); head frozen;
    - ``cosine`` also holds CoSENT + ``joint_lambda`` times a cosine-buffered loss (:class:`CoSENTPlusCosine`);
    - ``joint``: the head loss plus ``joint_lambda`` times the same loss on the cosine (:class:`Joint`);
    - ``contrastive``: in-batch contrastive on ``(u, v)`` of positive pairs only (the "+Contrast" baseline);
      :attr:`min_label` says which training pairs count as positives.

    ``values``: the loss's knobs (:meth:`LossSpec.knobs`); a knob not given takes its declared default.
    """

    def __init__(self, name: str, **values):
        super().__init__()
        self.loss = build_loss(name, **values)
        self.name, self.kind = name, LOSSES[name].kind
        self.min_label = getattr(self.loss, "min_label", None)

    @classmethod
    def from_params(cls, p) -> "Objective":
        """The objective a :class:`~stsreg.infra.config.Stage2Params` names (``loss`` with the knobs it reads)."""
        return cls(p.loss, **{name: getattr(p, name) for name in LOSSES[p.loss].knobs()})

    @property
    def score_map(self) -> list[float] | None:
        """The served score after training with this objective (:meth:`SiameseRegressor.predict`): None = the head
        (head losses train it); ``[cos_a, cos_b]`` for the cosine-buffer and joint losses (the map they train);
        ``[5, 0]`` for the other encoder objectives (cosine MSE trains cos ~ label / 5; CoSENT and contrastive train
        no scale, so that map is only monotone, not calibrated), whose training leaves the head stale."""
        kind = LOSSES[self.name].score_map  # head | cosine map | fixed (stsreg.infra.loss_specs)
        if kind == "head":
            return None
        if kind == "cosine map":
            cosine = self.loss if isinstance(self.loss, AffineCosine) else self.loss.cosine
            return [float(cosine.a), float(cosine.b)]
        return [5.0, 0.0]

    def forward(self, u: torch.Tensor, v: torch.Tensor, score: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """The loss of a batch: u, v (batch, d) embeddings, score (batch,) the head's output, labels (batch,) on the
        data's scale; the loss takes those it declares it reads (its ``reads``), in that order."""
        given = {"u": u, "v": v, "score": score, "labels": labels}
        return self.loss(*(given[name] for name in self.loss.reads))



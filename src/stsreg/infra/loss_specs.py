"""The stage-2 losses, declared once: each ``stage2.loss`` name with what it reads from the model (``kind``), the
loss it applies (``base``), and from that the knobs it reads and the score map it trains. Params validation
(:mod:`stsreg.infra.config`), the objective (:class:`stsreg.product.objective.Objective`), the search's space
(:func:`stsreg.experiments.search.uses`) and the model card derive from :data:`LOSSES`; :mod:`stsreg.product.losses`
implements each ``base`` (:data:`stsreg.product.losses.BASES`).

Kinds: ``head`` (a loss on the regression head's output vs labels: the paper's method), ``pair`` (a loss on
``cos(u, v)``; the head is unused), ``cosine`` (a buffered loss on ``cos_a * cos(u, v) + cos_b``, optionally added to
CoSENT), ``joint`` (the head loss plus ``joint_lambda`` times the same loss on the cosine map), ``contrastive``
(in-batch contrastive on positive pairs).

    >>> sorted(LOSSES["smooth_k2_cos"].knobs())
    ['cos_a', 'cos_b', 'k', 'x0', 'zero_negative']
    >>> LOSSES["mse"].score_map, LOSSES["joint_smooth_k2"].score_map, LOSSES["cosent"].score_map
    ('head', 'cosine map', 'fixed')
"""

from __future__ import annotations

from dataclasses import dataclass

#: Buffered losses (a zero-loss zone ``|pred - label| <= x0``): their knobs. Smooth K2 also reads ``k``.
BUFFERED = {"smooth_k2": ("x0", "k"), "translated_relu": ("x0",)}


@dataclass(frozen=True)
class LossSpec:
    """``name``: the ``stage2.loss`` value; ``kind``: see the module docstring; ``base``: the loss applied
    (``smooth_k2``, ``translated_relu``, ``mse``, ``l1``, ``cosent``, ``cosine_mse``, ``contrastive``); ``plus_cosent``:
    CoSENT plus ``joint_lambda`` times the base on the cosine map."""

    name: str
    kind: str
    base: str
    plus_cosent: bool = False

    def knobs(self) -> set[str]:
        """The ``stage2`` fields this loss reads beyond the optimisation's."""
        used = set(BUFFERED.get(self.base, ()))
        if self.kind in ("cosine", "joint"):
            used |= {"cos_a", "cos_b"}
        if self.kind == "joint" or self.plus_cosent:
            used.add("joint_lambda")
        if self.kind == "contrastive":
            used |= {"temperature", "contrastive_min_label"}
        if self.kind == "head" or self.base in BUFFERED:
            used.add("zero_negative")
        return used

    @property
    def score_map(self) -> str:
        """What serves the score after training: ``head`` (the trained head), ``cosine map`` (``[cos_a, cos_b]``, the
        map it trained), ``fixed`` (``5 * cos``: monotone, calibrated only for cosine MSE)."""
        return {"head": "head", "cosine": "cosine map", "joint": "cosine map"}.get(self.kind, "fixed")


LOSSES: dict[str, LossSpec] = {s.name: s for s in (
    LossSpec("smooth_k2", "head", "smooth_k2"),
    LossSpec("translated_relu", "head", "translated_relu"),
    LossSpec("mse", "head", "mse"),
    LossSpec("l1", "head", "l1"),
    LossSpec("cosent", "pair", "cosent"),
    LossSpec("cosine_mse", "pair", "cosine_mse"),
    LossSpec("contrastive", "contrastive", "contrastive"),
    LossSpec("smooth_k2_cos", "cosine", "smooth_k2"),
    LossSpec("translated_relu_cos", "cosine", "translated_relu"),
    LossSpec("joint_smooth_k2", "joint", "smooth_k2"),
    LossSpec("joint_translated_relu", "joint", "translated_relu"),
    LossSpec("cosent_smooth_k2_cos", "cosine", "smooth_k2", plus_cosent=True),
    LossSpec("cosent_translated_relu_cos", "cosine", "translated_relu", plus_cosent=True),
)}
#: Every stage-2 loss name, and the head losses (stage 1 trains the head with one of these).
STAGE2_LOSSES = tuple(LOSSES)
HEAD_LOSSES = tuple(n for n, s in LOSSES.items() if s.kind == "head")

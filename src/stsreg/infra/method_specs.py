"""The rows of the experiments' tables, declared once: the comparison's methods (``stsreg compare``), the NLI-only
table's objectives (``stsreg nli-table``, and stage 1's optional encoder step) and the training steps the profile
measures (``stsreg profile``). Params' choices and defaults (``compare.methods``, ``nli_table.objectives``,
``stage1.encoder.objective``, ``profile.methods``), the comparison's recipes and regression rows, what each NLI
objective trains on and what each profiled step runs derive from these tables: a new row is one entry here (a new loss
or objective is also its code: :mod:`stsreg.infra.loss_specs`, :mod:`stsreg.product.training.nli`).
"""

from __future__ import annotations

from dataclasses import dataclass

from stsreg.infra.loss_specs import LOSSES


@dataclass(frozen=True)
class CompareMethod:
    """A comparison row: what stage 2 starts from (``init``: ``encoder``, the backbone as given; ``stage1``, the
    backbone with the head trained on NLI, the paper's framework, whose rows the paired tests compare; ``None``: the
    untouched backbone, nothing trained) and its stage-2 loss (a :data:`stsreg.infra.loss_specs.LOSSES` name);
    ``default``: a row of ``compare.methods`` by default (an extra row is run when a user names it)."""

    name: str
    init: str | None = None
    loss: str | None = None
    default: bool = True

    def __post_init__(self):
        if self.init not in (None, "encoder", "stage1") or (self.init is None) != (self.loss is None):
            raise ValueError(f"{self.name}: init must be encoder or stage1 with a loss, or neither (the backbone)")
        if self.loss is not None and self.loss not in LOSSES:
            raise ValueError(f"{self.name}: unknown stage-2 loss {self.loss!r}")


COMPARE: dict[str, CompareMethod] = {m.name: m for m in (
    CompareMethod("base"),
    CompareMethod("contrast", "encoder", "contrastive"),
    CompareMethod("cosent", "encoder", "cosent"),
    CompareMethod("cosine_mse", "encoder", "cosine_mse"),
    CompareMethod("ours", "stage1", "smooth_k2"),
    CompareMethod("translated_relu", "stage1", "translated_relu"),
    CompareMethod("mse", "stage1", "mse"),
    CompareMethod("ours_cos", "stage1", "smooth_k2_cos"),
    CompareMethod("ours_joint", "stage1", "joint_smooth_k2", default=False),
)}
#: The comparison's rows in table order (params' choices), and those run by default (``compare.methods``).
COMPARE_METHODS = tuple(COMPARE)
DEFAULT_COMPARE = tuple(m.name for m in COMPARE.values() if m.default)


@dataclass(frozen=True)
class NliObjective:
    """An NLI-only row: what it trains on (``kind``: ``pair``, (premise, hypothesis, label 0/1/2); ``triple``,
    (premise, entailment, contradiction); ``sentence``, distinct sentences, each twice through dropout; ``None``: the
    untouched backbone)."""

    name: str
    kind: str | None = None

    def __post_init__(self):
        if self.kind not in (None, "pair", "triple", "sentence"):
            raise ValueError(f"{self.name}: kind must be pair, triple, sentence or None")


NLI: dict[str, NliObjective] = {o.name: o for o in (
    NliObjective("base"),
    NliObjective("softmax", "pair"), NliObjective("mse", "pair"), NliObjective("l1", "pair"),
    NliObjective("translated_relu", "pair"), NliObjective("smooth_k2", "pair"),
    NliObjective("triplet", "triple"), NliObjective("simcse_sup", "triple"),
    NliObjective("simcse_unsup", "sentence"),
)}
#: The NLI-only table's rows in table order: params' choices and the default of ``nli_table.objectives``.
NLI_OBJECTIVES = tuple(NLI)


@dataclass(frozen=True)
class ProfileMethod:
    """A training step the profile measures (:mod:`stsreg.experiments.profiling.measure`): ``loss`` ``regression``
    (Smooth K2 on the head over a pair: 2 sequences) or ``contrastive`` (in-batch contrastive over anchor, positive
    and hard negative: 3 sequences); ``frozen``: the encoder runs without gradients and only the head learns (stage
    1)."""

    name: str
    loss: str
    frozen: bool = False

    def __post_init__(self):
        if self.loss not in ("regression", "contrastive") or (self.frozen and self.loss != "regression"):
            raise ValueError(f"{self.name}: loss must be regression or contrastive; only a regression step can be "
                             f"frozen")

    @property
    def sequences(self) -> int:
        """Token sequences per example: 2 for a pair, 3 for a contrastive triple."""
        return 3 if self.loss == "contrastive" else 2


PROFILE: dict[str, ProfileMethod] = {m.name: m for m in (
    ProfileMethod("regression_frozen", "regression", frozen=True),  # stage 1
    ProfileMethod("regression_full", "regression"),                # stage 2
    ProfileMethod("contrastive", "contrastive"),                   # supervised SimCSE
)}
#: The profiled steps in table order: params' choices and the default of ``profile.methods``.
PROFILE_METHODS = tuple(PROFILE)

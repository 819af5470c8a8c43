"""The stage-2 losses, declared once. A :class:`LossSpec` owns everything a ``stage2.loss`` name means: the class that
computes it (in :mod:`stsreg.product.losses`, built by :func:`stsreg.product.objective.build_loss`), what it reads
from the model (``kind``), the loss it wraps (``base``), its knobs (:class:`LossKnob`: a ``stage2`` field with its
default, help and limits, and the range the search may give it), which of those the search varies, a line of help and
its line in the model card. Everything else derives from :data:`LOSSES`: the ``stage2`` and ``search`` fields
(:mod:`stsreg.infra.settings_training`, :mod:`stsreg.infra.settings_experiments`), the objective, the search's space
(:func:`stsreg.experiments.search.uses`), the model card, ``stsreg losses`` and the golden ``losses`` case.

Kinds: ``head`` (a loss on the regression head's output vs labels: the paper's method), ``pair`` (a loss on
``cos(u, v)``; the head is unused), ``cosine`` (a buffered loss on ``cos_a * cos(u, v) + cos_b``, optionally added to
CoSENT), ``joint`` (the head loss plus ``joint_lambda`` times the same loss on the cosine map), ``contrastive``
(in-batch contrastive on positive pairs).

Adding a loss with a knob of its own is one entry here (and its class)::

    HUBER = LossKnob("delta", 1.0, "huber: where the loss turns from squared to linear", {"gt": 0}, (0.5, 2.0))
    LossSpec("huber", "head", "Huber", "Huber loss on the head", knobs=(HUBER,), searched=("delta",),
             card="delta {delta:g}")

    >>> sorted(LOSSES["smooth_k2_cos"].knobs())
    ['cos_a', 'cos_b', 'k', 'x0', 'zero_negative']
    >>> LOSSES["mse"].score_map, LOSSES["joint_smooth_k2"].score_map, LOSSES["cosent"].score_map
    ('head', 'cosine map', 'fixed')
    >>> LOSSES["joint_smooth_k2"].card_line({"x0": 0.2, "k": 3.0, "cos_a": 5.0, "cos_b": 0.0, "joint_lambda": 1.0})
    'x0 0.2, k 3, cosine map a=5, b=0, lambda 1'
"""

from __future__ import annotations

from dataclasses import dataclass, field

from stsreg.infra.knobs import knob


@dataclass(frozen=True)
class LossKnob:
    """A ``stage2`` field some loss reads: ``default``, ``help`` and ``limits`` (``ge``/``gt``/``le``/``lt``, as
    :func:`stsreg.infra.knobs.knob` takes them); ``search``: the ``[low, high]`` range ``params.search`` gives it by
    default, for a knob a loss lets the search vary (None: trials take ``params.stage2``'s value); ``fmt``: how the
    search's report writes a trial's value."""

    name: str
    default: float | bool
    help: str
    limits: dict = field(default_factory=dict)
    search: tuple[float, float] | None = None
    fmt: str = "{:.2f}"


X0 = LossKnob("x0", 0.2, "buffered losses: buffer half-width on the 0-5 label scale (x0 <= d/2)", {"ge": 0},
              (0.0, 0.5), "{:.3f}")
K = LossKnob("k", 3.0, "buffered losses: slope of the loss outside the buffer", {"gt": 0}, (1.5, 4.0))
ZERO_NEGATIVE = LossKnob("zero_negative", False, "buffered losses, authors' option: no loss for negative predictions")
TEMPERATURE = LossKnob("temperature", 0.05, "contrastive: softmax temperature", {"gt": 0})
MIN_LABEL = LossKnob("contrastive_min_label", 4.0, "contrastive: pairs scoring >= this are positives")
COS_A = LossKnob("cos_a", 5.0, "*_cos / joint_*: slope of the map a*cos+b from cosine to the label scale", {"gt": 0})
COS_B = LossKnob("cos_b", 0.0, "*_cos / joint_*: offset of that map (a=5, b=0: cosine 1 -> 5, 0 -> 0)")
LAMBDA = LossKnob("joint_lambda", 1.0, "joint_* / cosent_*: weight of the cosine term", {"ge": 0}, (0.1, 3.0))


@dataclass(frozen=True)
class LossSpec:
    """``name``: the ``stage2.loss`` value; ``kind``: see the module docstring; ``cls``: its class in
    :mod:`stsreg.product.losses`, built with ``base``'s module first (when it wraps one) and its own knobs by name;
    ``help``: one line for ``stsreg losses``; ``knobs``: its own knobs (a wrapped loss adds ``base``'s);
    ``searched``: the knobs the search may vary; ``card``: its part of the model card's line, formatted with the
    knobs' values."""

    name: str
    kind: str
    cls: str
    help: str
    knobs_own: tuple[LossKnob, ...] = ()
    base: str | None = None
    searched: tuple[str, ...] = ()
    card: str = ""

    def chain(self) -> list[LossSpec]:
        """This loss and the ones it wraps, outermost first."""
        return [self] + (LOSSES[self.base].chain() if self.base else [])

    def knobs(self) -> dict[str, LossKnob]:
        """Every ``stage2`` field this loss reads beyond the optimisation's, its wrapped loss's included."""
        return {k.name: k for spec in reversed(self.chain()) for k in spec.knobs_own}

    def varies(self) -> tuple[str, ...]:
        """The knobs the search may vary for this loss (its own and its wrapped loss's)."""
        return tuple(n for spec in reversed(self.chain()) for n in spec.searched)

    def card_line(self, values: dict) -> str:
        """The knobs as the model card writes them (``x0 0.2, k 3, cosine map a=5, b=0``)."""
        return ", ".join(spec.card.format(**values) for spec in reversed(self.chain()) if spec.card)

    @property
    def score_map(self) -> str:
        """What serves the score after training: ``head`` (the trained head), ``cosine map`` (``[cos_a, cos_b]``, the
        map it trained), ``fixed`` (``5 * cos``: monotone, calibrated only for cosine MSE)."""
        return {"head": "head", "cosine": "cosine map", "joint": "cosine map"}.get(self.kind, "fixed")


_COSINE_MAP = "cosine map a={cos_a:g}, b={cos_b:g}"
_LOSS_LIST = (
    LossSpec(
        "smooth_k2",
        "head",
        "SmoothK2",
        "Smooth K2 on the head: k * (|pred - label| - x0)^2 outside the buffer",
        (X0, K, ZERO_NEGATIVE),
        searched=("x0", "k"),
        card="x0 {x0:g}, k {k:g}",
    ),
    LossSpec(
        "translated_relu",
        "head",
        "TranslatedReLU",
        "Translated ReLU on the head: k * max(0, |pred - label| - x0)",
        (X0, K, ZERO_NEGATIVE),
        searched=("x0",),
        card="x0 {x0:g}",
    ),
    LossSpec("mse", "head", "MSE", "mean squared error on the head"),
    LossSpec("l1", "head", "L1", "mean absolute error on the head"),
    LossSpec("cosent", "pair", "CoSENT", "CoSENT on cos(u, v): only the label order counts"),
    LossSpec("cosine_mse", "pair", "CosineMSE", "MSE between cos(u, v) and the label / 5 (SBERT's regression)"),
    LossSpec(
        "contrastive",
        "contrastive",
        "InBatchContrastive",
        "in-batch contrastive on the positive pairs (the +Contrast baseline)",
        (TEMPERATURE, MIN_LABEL),
    ),
    LossSpec(
        "smooth_k2_cos",
        "cosine",
        "AffineCosine",
        "Smooth K2 on |cos_a * cos(u, v) + cos_b - label|",
        (COS_A, COS_B),
        base="smooth_k2",
        card=_COSINE_MAP,
    ),
    LossSpec(
        "translated_relu_cos",
        "cosine",
        "AffineCosine",
        "Translated ReLU on |cos_a * cos(u, v) + cos_b - label|",
        (COS_A, COS_B),
        base="translated_relu",
        card=_COSINE_MAP,
    ),
    LossSpec(
        "joint_smooth_k2",
        "joint",
        "Joint",
        "Smooth K2 on the head + joint_lambda * on the cosine map",
        (COS_A, COS_B, LAMBDA),
        base="smooth_k2",
        searched=("joint_lambda",),
        card=_COSINE_MAP + ", lambda {joint_lambda:g}",
    ),
    LossSpec(
        "joint_translated_relu",
        "joint",
        "Joint",
        "Translated ReLU on the head + joint_lambda * on the cosine map",
        (COS_A, COS_B, LAMBDA),
        base="translated_relu",
        searched=("joint_lambda",),
        card=_COSINE_MAP + ", lambda {joint_lambda:g}",
    ),
    LossSpec(
        "cosent_smooth_k2_cos",
        "cosine",
        "CoSENTPlusCosine",
        "CoSENT + joint_lambda * Smooth K2 on the cosine map",
        (COS_A, COS_B, LAMBDA),
        base="smooth_k2",
        searched=("joint_lambda",),
        card=_COSINE_MAP + ", lambda {joint_lambda:g}",
    ),
    LossSpec(
        "cosent_translated_relu_cos",
        "cosine",
        "CoSENTPlusCosine",
        "CoSENT + joint_lambda * Translated ReLU on the cosine map",
        (COS_A, COS_B, LAMBDA),
        base="translated_relu",
        searched=("joint_lambda",),
        card=_COSINE_MAP + ", lambda {joint_lambda:g}",
    ),
)
LOSSES: dict[str, LossSpec] = {s.name: s for s in _LOSS_LIST}


def stage2_losses() -> tuple[str, ...]:
    """Every stage-2 loss name."""
    return tuple(LOSSES)


def head_losses() -> tuple[str, ...]:
    """The losses on the head alone (stage 1 trains the head with one of these)."""
    return tuple(n for n, s in LOSSES.items() if s.kind == "head" and not s.base)


def knobs() -> dict[str, LossKnob]:
    """Every loss knob, in declaration order: the ``stage2`` fields the losses own."""
    out: dict[str, LossKnob] = {}
    for spec in LOSSES.values():
        for k in spec.knobs_own:
            if out.setdefault(k.name, k) != k:
                raise ValueError(f"loss knob {k.name!r} is declared twice, differently ({spec.name})")
    return out


def searched_knobs() -> dict[str, LossKnob]:
    """The knobs some loss lets the search vary: the ``search`` ranges and ``search.enqueue`` fields they own."""
    varied = {n for spec in LOSSES.values() for n in spec.varies()}
    return {n: k for n, k in knobs().items() if n in varied}


def stage2_fields() -> dict:
    """The ``stage2`` fields the loss knobs are (for :func:`stsreg.infra.knobs.add_knobs`)."""
    return {k.name: (type(k.default), knob(k.default, k.help, **k.limits)) for k in knobs().values()}


def search_fields() -> dict:
    """The ``search`` ranges of the knobs a loss lets the search vary: ``[low, high]`` each."""
    return {k.name: (tuple[float, ...], knob(k.search, f"[low, high]; {k.help}", **k.limits))
            for k in searched_knobs().values()}


def point_fields() -> dict:
    """The fields of a ``search.enqueue`` point for those knobs (used only where its loss reads them)."""
    return {k.name: (type(k.default), knob(k.default, k.help, **k.limits)) for k in searched_knobs().values()}


#: Every stage-2 loss name, and the head losses (stage 1 trains the head with one of these).
STAGE2_LOSSES = stage2_losses()
HEAD_LOSSES = head_losses()

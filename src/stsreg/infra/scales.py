"""Score scales, written once: the rule a scale obeys and the linear maps between a table's scale (or the served
scale) and the 0-5 scale the losses, the buffer ``x0`` and the cosine map are set on.

    >>> valid_scale((0, 100)), valid_scale((5, 5))
    (True, False)
    >>> float(to_internal(70.0, (0, 100))), float(from_internal(3.5, (0, 100))), internal_gap(10, (0, 100))
    (3.5, 70.0, 0.5)
"""

from __future__ import annotations

#: The scale every score is trained and predicted on (STS-B's 0-5).
INTERNAL = (0.0, 5.0)


def valid_scale(scale) -> bool:
    """Whether ``scale`` is ``[lo, hi]`` with ``lo < hi`` (a table's annotation scale, the served scale)."""
    return len(scale) == 2 and scale[0] < scale[1]


def check_scale(scale) -> None:
    """Raise ``ValueError`` naming ``scale`` unless it is valid (:func:`valid_scale`): the rule of a section's scale
    field (a declared table's, the served one)."""
    if not valid_scale(scale):
        raise ValueError(f"scale must be [lo, hi] with lo < hi, got {list(scale)}")


def to_internal(score, scale: tuple[float, float], rescale: bool = True):
    """Scores (a float, array or Series) on ``scale`` -> the 0-5 scale (linear); unchanged where ``scale`` is 0-5
    already or ``rescale`` is false (a scale inside 0-5 kept as annotated: SICK-R's 1-5)."""
    if not rescale or tuple(scale) == INTERNAL:
        return score
    lo, hi = scale
    return (score - lo) * (INTERNAL[1] - INTERNAL[0]) / (hi - lo) + INTERNAL[0]


def from_internal(score, scale: tuple[float, float]):
    """Scores on the 0-5 scale -> ``scale`` (the inverse of :func:`to_internal`; the served score's map)."""
    lo, hi = scale
    return (score - INTERNAL[0]) * (hi - lo) / (INTERNAL[1] - INTERNAL[0]) + lo


def internal_gap(d: float, scale: tuple[float, float], rescale: bool = True) -> float:
    """``d`` (the gap between a scale's categories) on the 0-5 scale: mapped with the scores, or kept."""
    lo, hi = scale
    return d * (INTERNAL[1] - INTERNAL[0]) / (hi - lo) if rescale else d

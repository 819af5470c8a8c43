"""A version's description fits the registry's column on every store: MLflow keeps it in a VARCHAR(5000) on
PostgreSQL (a team's server refused the model card plus the gate's verdict: StringDataRightTruncation)."""

from __future__ import annotations

from stsreg.product.registry import CARD_POINTER, DESCRIPTION_LIMIT, GATE_HEADING, fitted


def _card(sections: int, size: int) -> str:
    return "# model\n\nintro" + "".join(f"\n\n## Section {i}\n\n" + "x" * size for i in range(sections))


def test_a_card_that_fits_is_kept_whole_and_the_verdict_follows_it():
    card, gate = _card(3, 100), f"{GATE_HEADING}\n\nPromoted: better.\n"
    assert fitted(card, gate) == f"{card}\n\n{gate}" and fitted(card) == card


def test_a_long_card_keeps_its_leading_whole_sections_points_to_the_readme_and_ends_with_the_whole_verdict():
    card, gate = _card(12, 600), f"{GATE_HEADING}\n\nNot promoted: " + "r" * 300 + ".\n"
    out = fitted(card, gate)
    assert len(out) <= DESCRIPTION_LIMIT and out.endswith(gate) and CARD_POINTER in out
    head = out.split(CARD_POINTER)[0].rstrip()
    assert card.startswith(head) and head.endswith("x" * 600)  # whole sections only, in order
    assert head.count("## Section") == 7  # the eighth (617 characters) passes the limit


def test_fitting_again_after_a_verdict_gives_the_same_card_part():
    """The gate records its verdict again on a re-run: the card part read back (pointer and old verdict removed)
    fits to the same text."""
    card = _card(12, 600)
    first = fitted(card, f"{GATE_HEADING}\n\nPromoted: a.\n")
    again = fitted(first.split(GATE_HEADING)[0].rstrip(), f"{GATE_HEADING}\n\nPromoted: b.\n")
    assert again.split(GATE_HEADING)[0] == first.split(GATE_HEADING)[0] and len(again) <= DESCRIPTION_LIMIT

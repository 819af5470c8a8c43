"""The promotion gate's verdict on its paired tests: the objectives (``promote.metrics``) must each gain at least
``promote.margin`` with p < ``promote.alpha``; the guards (``promote.guards``) may drop, but not by more than their
bound, read on the gain's lower 95% bound. :func:`stsreg.product.registry.promote` computes the tests (challenger
minus champion, or minus the untouched backbone for a first version) and moves the alias on this verdict."""

from __future__ import annotations

from stsreg.infra.config import PromoteParams


def _gain_text(view: str, test: dict) -> str:
    pairs = f", {test['pairs']} pairs" if "pairs" in test else ""
    return (f"{view} {test['diff']:+.2f} (95% CI {test['low']:+.2f}..{test['high']:+.2f}, p={test['p_value']:.3f}"
            f"{pairs})")


def guard_held(bound: float, test: dict) -> bool:
    """A guard holds when the metric's loss, read pessimistically (the gain's lower confidence bound), is at most
    ``bound`` Spearman points."""
    return test["low"] >= -bound


def verdict(gate: PromoteParams, tests: dict[str, dict], against: str, kept: str) -> tuple[bool, str, dict]:
    """(passed, reason, guards): every objective of ``promote.metrics`` must gain >= margin *and* be significant;
    every guard of ``promote.guards`` must hold (:func:`guard_held`). ``guards``: per guarded metric its bound, the
    gain's lower bound and whether it held."""
    passed, parts = True, []
    for crit in gate.metrics:
        test = tests[crit]
        ok_margin, ok_sig = test["diff"] >= gate.margin, test["p_value"] < gate.alpha
        passed &= ok_margin and ok_sig
        parts.append((_gain_text(f"{crit}-unseen" if gate.unseen_only else crit, test),
                      [f"gain below margin {gate.margin}"] * (not ok_margin)
                      + [f"not significant at alpha {gate.alpha}"] * (not ok_sig), crit))
    guards = {}
    for crit, bound in gate.guards.items():
        test, view = tests[crit], f"{crit}-unseen" if gate.unseen_only else crit
        held = guard_held(bound, test)
        passed &= held
        guards[crit] = {"bound": bound, "low": test["low"], "held": held}
        parts.append((f"guard {_gain_text(view, test)} "
                      + (f"held (drop at most {bound:g})" if held else f"broken (may drop at most {bound:g})"),
                      [] if held else [f"guard broken: the lower bound {test['low']:+.2f} is below -{bound:g}"],
                      crit))
    gains = "; ".join(g for g, _, _ in parts) + f" vs {against}"
    failed = [(f"{crit}: " if len(parts) > 1 else "") + " and ".join(why) for _, why, crit in parts if why]
    return passed, gains + ("; promoted" if passed else f"; {kept}: " + "; ".join(failed)), guards

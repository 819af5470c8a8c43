"""The gate judges the user's task and guards the rest (``promote.metrics`` must gain, ``promote.guards`` may not drop
by more than their bound, read on the gain's lower confidence bound): each verdict on the numbers of
docs/own_data.md's retrain, then on a real MLflow registry with prediction tables made to gain or lose."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from stsreg.infra.config import PromoteParams, parse_params
from stsreg.infra.errors import ParamsError
from stsreg.product import registry
from stsreg.product.gate_verdict import verdict
from stsreg.product.data.catalogue import EVAL_TASKS
from tests.helpers.gate_tables import predictions as _predictions, registered_version as _version


def _test(diff, low, high, p):
    return {"diff": diff, "low": low, "high": high, "p_value": p, "n_resamples": 1000}


#: docs/own_data.md's cold retrain against champion v1: qa-unseen +0.59 (p 0.042), avg7-unseen +0.09 (p 0.034)
DOCS_RETRAIN = {"qa": _test(0.59, -0.09, 1.27, 0.042), "avg7": _test(0.09, -0.01, 0.19, 0.034)}


def test_the_docs_retrain_is_kept_by_the_old_gate_and_promoted_with_avg7_as_a_guard():
    old = PromoteParams(unseen_only=True, metrics=("avg7", "qa"))
    passed, reason, guards = verdict(old, DOCS_RETRAIN, "champion v1", "kept the champion")
    assert not passed and "avg7: gain below margin 0.1" in reason and guards == {}

    new = PromoteParams(unseen_only=True, metrics=("qa",), guards={"avg7": 0.3})
    passed, reason, guards = verdict(new, DOCS_RETRAIN, "champion v1", "kept the champion")
    assert passed and reason.endswith("; promoted")
    assert "qa-unseen +0.59" in reason and "guard avg7-unseen +0.09" in reason and "held (drop at most 0.3)" in reason
    assert guards == {"avg7": {"bound": 0.3, "low": -0.01, "held": True}}


def test_a_task_gain_that_costs_a_point_of_avg7_is_not_promoted():
    tests = {"qa": _test(2.1, 1.2, 3.0, 0.001), "avg7": _test(-1.0, -1.21, -0.8, 1.0)}
    gate = PromoteParams(metrics=("qa",), guards={"avg7": 0.3})
    passed, reason, guards = verdict(gate, tests, "champion v1", "kept the champion")
    assert not passed and guards["avg7"]["held"] is False
    assert "avg7: guard broken: the lower bound -1.21 is below -0.3" in reason


def test_a_guard_holds_on_a_small_drop_and_never_excuses_a_task_that_did_not_gain():
    small_drop = {"qa": _test(0.8, 0.3, 1.3, 0.002), "avg7": _test(-0.1, -0.25, 0.05, 0.9)}
    gate = PromoteParams(metrics=("qa",), guards={"avg7": 0.3})
    assert verdict(gate, small_drop, "v1", "kept")[0]
    no_gain = {"qa": _test(0.05, -0.4, 0.5, 0.4), "avg7": _test(0.5, 0.3, 0.7, 0.001)}
    passed, reason, _ = verdict(gate, no_gain, "v1", "kept")
    assert not passed and "qa: gain below margin 0.1 and not significant at alpha 0.05" in reason


def test_guards_are_read_checked_and_refused_where_they_contradict_the_objectives():
    import yaml

    from tests.conftest import REPO

    raw = yaml.safe_load((REPO / "params.yaml").read_text())
    raw["promote"].update(metrics=["sts12"], guards={"avg7": 0.3, "sts13": 1})
    assert parse_params(raw).promote.guards == {"avg7": 0.3, "sts13": 1.0}
    raw["promote"]["guards"] = {"avg7": -0.3, "nope": 1.0}
    with pytest.raises(ParamsError, match=r"promote.guards.avg7: expected a value >= 0"):
        parse_params(raw)
    raw["promote"]["guards"] = {"nope": 1.0}
    with pytest.raises(ParamsError, match=r"promote.guards: unknown table\(s\) \['nope'\]"):
        parse_params(raw)
    raw["promote"]["guards"] = {"sts12": 1.0}
    with pytest.raises(ParamsError, match=r"promote.guards: \['sts12'\] also in promote.metrics"):
        parse_params(raw)
    raw["promote"]["guards"] = None  # `guards:` left empty: no guard
    assert parse_params(raw).promote.guards == {}


@pytest.mark.parametrize("public_noise, promoted", [(0.3, True), (1.2, False)])
def test_the_registry_gate_promotes_a_task_gain_only_while_the_guard_holds(tmp_path, public_noise, promoted):
    """A real MLflow store: champion v1 and a challenger v2 better on ``qa``; with the public tasks as good as before
    it is promoted, with them a lot worse (the guard broken) the champion stays."""
    from stsreg.infra import tracking

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    c = tracking.client(uri)
    rng = np.random.default_rng(0)
    gold = {t: rng.uniform(0, 5, 300) for t in (*EVAL_TASKS, "qa")}
    champion = _predictions(rng, {**{t: 0.3 for t in EVAL_TASKS}, "qa": 1.5}, gold)
    challenger = _predictions(rng, {**{t: public_noise for t in EVAL_TASKS}, "qa": 0.6}, gold)
    name = "sts-regression"
    v1 = _version(c, name, champion, tmp_path)
    c.set_registered_model_alias(name, "champion", v1)
    v2 = _version(c, name, challenger, tmp_path)
    c.set_registered_model_alias(name, "challenger", v2)

    gate = PromoteParams(metrics=("qa",), guards={"avg7": 0.3})
    out = registry.promote(gate, n_resamples=200, seed=0, uri=uri)
    assert out["promoted"] is promoted and out["test"] == out["tests"]["qa"] and out["tests"]["qa"]["diff"] > 5
    assert out["guards"]["avg7"]["held"] is promoted and set(out["tests"]) == {"qa", "avg7"}
    assert c.get_model_version_by_alias(name, "champion").version == (v2 if promoted else v1)
    assert c.get_model_version(name, v2).tags["promotion.reason"] == out["reason"]
    assert ("guard avg7" in out["reason"]) and (("held" in out["reason"]) is promoted)
    card = c.get_model_version(name, v2).description  # the version's card ends with the verdict, the guard named
    assert card.endswith(f"## The promotion gate\n\n{'Promoted' if promoted else 'Not promoted'}: {out['reason']}.\n")

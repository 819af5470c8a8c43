"""The experiments' rows are declared once (stsreg.infra.method_specs): one entry added there is a comparison row that
params validation accepts, the comparison builds a recipe for (and counts among the regression rows when it starts
from stage 1), an NLI-only row with its training kind, and a profiled step that params accept and the profile runs."""

import json
import subprocess
import sys
import textwrap

import pytest

from tests.conftest import REPO

ADD_ONE = textwrap.dedent('''
    import json
    from stsreg.infra import method_specs as ms
    ms.COMPARE["toy_l1"] = ms.CompareMethod("toy_l1", "stage1", "l1")
    ms.COMPARE_METHODS = tuple(ms.COMPARE)
    ms.DEFAULT_COMPARE = tuple(m.name for m in ms.COMPARE.values() if m.default)
    ms.NLI["toy_triplet"] = ms.NliObjective("toy_triplet", "triple")
    ms.NLI_OBJECTIVES = tuple(ms.NLI)
    ms.PROFILE["toy_frozen"] = ms.ProfileMethod("toy_frozen", "regression", frozen=True)
    ms.PROFILE_METHODS = tuple(ms.PROFILE)  # before anything reads the registries
    from stsreg.infra.config import parse_params
    from stsreg.experiments import compare
    from stsreg.experiments.profiling import grid, measure
    from stsreg.product.training import nli

    params = parse_params({"compare": {"methods": ["base", "toy_l1"]}, "nli_table": {"objectives": ["toy_triplet"]},
                           "profile": {"methods": ["toy_frozen"]}})
    spec = grid.GridSpec(methods=("toy_frozen",), batch_sizes=(8,), lengths=(16,))
    print(json.dumps({"methods": list(params.compare.methods), "default": list(parse_params({}).compare.methods),
                      "recipe": compare.METHODS["toy_l1"], "regression": "toy_l1" in compare.REGRESSION,
                      "stage2_loss": compare.stage2_for(params, "toy_l1").loss,
                      "nli": list(params.nli_table.objectives),
                      "kind": nli.KINDS["toy_triplet"], "profile": list(params.profile.methods),
                      "measured": "toy_frozen" in measure.METHODS, "points": spec.configs("toy_frozen")}))
''')


def test_one_entry_adds_a_comparison_row_an_nli_row_and_a_profiled_step():
    run = subprocess.run([sys.executable, "-c", ADD_ONE], cwd=REPO, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["methods"] == ["base", "toy_l1"] and out["default"][-1] == "toy_l1"
    assert out["recipe"] == {"init": "stage1", "loss": "l1"} and out["regression"] and out["stage2_loss"] == "l1"
    assert out["nli"] == ["toy_triplet"] and out["kind"] == "triple"
    # a profiled step: accepted by params, measured, and given the regression steps' headline point
    assert out["profile"] == ["toy_frozen"] and out["measured"] and out["points"] == [[8, 16], [64, 256]]


def test_a_row_without_a_declared_loss_or_start_is_refused_where_it_is_declared():
    from stsreg.infra.method_specs import CompareMethod, NliObjective

    with pytest.raises(ValueError, match="unknown stage-2 loss 'nope'"):
        CompareMethod("x", "stage1", "nope")
    with pytest.raises(ValueError, match="init must be"):
        CompareMethod("x", "stage1")
    with pytest.raises(ValueError, match="kind must be"):
        NliObjective("x", "quad")
    from stsreg.infra.method_specs import ProfileMethod

    with pytest.raises(ValueError, match="only a regression step can be frozen"):
        ProfileMethod("x", "contrastive", frozen=True)


def test_an_unknown_row_is_refused_by_params_with_the_declared_ones():
    from stsreg.infra.config import ParamsError, parse_params

    with pytest.raises(ParamsError, match=r"compare.methods\[0\]: expected one of base, contrast, .*ours_joint, got "
                                          r"'toy'"):
        parse_params({"compare": {"methods": ["toy"]}})


def test_one_entry_adds_a_baseline_system():
    """A system declared in stsreg.infra.baseline_specs is a params choice, and its run's key holds the settings it
    declares it reads and no others."""
    code = textwrap.dedent('''
        import json
        from stsreg.infra import baseline_specs as bs
        bs.SYSTEMS["toy_gru"] = bs.System("recurrent", "GRU (toy)", "", "embeddings + GRU, cosine MSE", ("rnn_hidden",))
        bs.BASELINE_SYSTEMS = tuple(bs.SYSTEMS)
        from stsreg.infra.config import parse_params
        from stsreg.experiments.baselines import experiment

        params = parse_params({"baselines": {"systems": ["toy_gru"], "rnn_hidden": 64}})
        print(json.dumps({"systems": list(params.baselines.systems), "reads": experiment.settings(params, "toy_gru")}))
    ''')
    run = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out == {"systems": ["toy_gru"], "reads": {"rnn_hidden": 64}}

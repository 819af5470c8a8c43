"""The stage-2 losses are declared once (stsreg.infra.loss_specs.LOSSES): one entry added there is a loss that params
validation accepts, the objective builds, the search varies the right knobs of, and the model card describes."""

import json
import subprocess
import sys
import textwrap

from tests.conftest import REPO

ADD_ONE = textwrap.dedent('''
    import dataclasses, json
    import torch
    from stsreg.infra import loss_specs as ls
    ls.LOSSES["toy_relu_cos"] = ls.LossSpec("toy_relu_cos", "cosine", "translated_relu", plus_cosent=True)
    ls.STAGE2_LOSSES = tuple(ls.LOSSES)  # before anything reads the registry
    from stsreg.infra.config import parse_params
    from stsreg.product.objective import Objective
    from stsreg.experiments.search import uses
    from stsreg.product.model_card import _stage2

    params = parse_params({"stage2": {"loss": "toy_relu_cos", "x0": 0.25, "joint_lambda": 0.5}})
    objective = Objective.from_params(params.stage2)
    u, v = torch.randn(4, 8), torch.randn(4, 8)
    value = objective(u, v, torch.zeros(4), torch.tensor([0.0, 1.0, 4.0, 5.0]))
    print(json.dumps({"kind": objective.kind, "loss": type(objective.loss).__name__, "finite": bool(torch.isfinite(value)),
                      "map": objective.score_map, "uses": sorted(uses("toy_relu_cos")), "card": _stage2(params)}))
''')


def test_one_entry_adds_a_loss_everywhere():
    run = subprocess.run([sys.executable, "-c", ADD_ONE], cwd=REPO, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["kind"] == "cosine" and out["loss"] == "CoSENTPlusCosine" and out["finite"]
    assert out["map"] == [5.0, 0.0]  # the cosine map it trains (cos_a, cos_b defaults)
    assert out["uses"] == ["joint_lambda", "x0"]  # Translated ReLU reads no k
    assert "`toy_relu_cos` (x0 0.25, cosine map a=5, b=0, lambda 0.5)" in out["card"]


def test_every_declared_loss_builds_and_each_kind_reads_what_it_declares():
    import torch

    from stsreg.infra.loss_specs import LOSSES
    from stsreg.product.objective import Objective

    for name, spec in LOSSES.items():
        objective = Objective(name)
        assert objective.kind == spec.kind, name
        assert (objective.score_map is None) == (spec.score_map == "head"), name
        value = objective(torch.randn(6, 8), torch.randn(6, 8), torch.rand(6) * 5, torch.tensor([0.0, 1, 2, 3, 4, 5]))
        assert torch.isfinite(value), name

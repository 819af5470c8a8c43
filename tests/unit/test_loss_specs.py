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
    from stsreg.product import losses

    class Huber(torch.nn.Module):  # a toy loss with a knob of its own
        reads = ("score", "labels")  # what the objective hands it: the head's score

        def __init__(self, delta):
            super().__init__()
            self.delta = delta

        def forward(self, pred, labels):
            return torch.nn.functional.huber_loss(pred, labels, delta=self.delta)

    losses.Huber = Huber
    DELTA = ls.LossKnob("delta", 1.0, "huber: where the loss turns from squared to linear", {"gt": 0}, (0.5, 2.0))
    ls.LOSSES["huber"] = ls.LossSpec("huber", "head", "Huber", "Huber loss on the head", (DELTA,),
                                     searched=("delta",), card="delta {delta:g}")
    ls.LOSSES["toy_relu_cos"] = ls.LossSpec("toy_relu_cos", "cosine", "CoSENTPlusCosine", "toy", (ls.COS_A, ls.COS_B,
                                            ls.LAMBDA), base="translated_relu", searched=("joint_lambda",),
                                            card="cosine map a={cos_a:g}, b={cos_b:g}, lambda {joint_lambda:g}")
    ls.STAGE2_LOSSES, ls.HEAD_LOSSES = ls.stage2_losses(), ls.head_losses()  # before anything reads the registry
    from stsreg.infra.config import parse_params, Params
    from stsreg.product.objective import Objective
    from stsreg.experiments import search
    from stsreg.product.model_card import _stage2

    out = {}
    for name, knobs in (("toy_relu_cos", {"x0": 0.25, "joint_lambda": 0.5}), ("huber", {"delta": 0.7})):
        params = parse_params({"stage2": {"loss": name, **knobs}})
        objective = Objective.from_params(params.stage2)
        u, v = torch.randn(4, 8), torch.randn(4, 8)
        value = objective(u, v, torch.zeros(4), torch.tensor([0.0, 1.0, 4.0, 5.0]))
        out[name] = {"kind": objective.kind, "loss": type(objective.loss).__name__,
                     "finite": bool(torch.isfinite(value)), "map": objective.score_map,
                     "uses": sorted(search.uses(name)), "card": _stage2(params)}
    out["search_range"] = list(Params().search.delta)
    out["searched"], out["fixed"] = list(search.SEARCHED), list(search.FIXED)
    out["huber_delta"] = Objective("huber").loss.delta
    out["help"] = [f.metadata["knob"].get("help", "") for f in dataclasses.fields(Params().stage2) if f.name == "loss"]
    print(json.dumps(out))
''')


def test_one_entry_adds_a_loss_everywhere():
    """A Huber loss with a knob of its own (``delta``) and a CoSENT-plus-Translated-ReLU variant, each one
    :class:`LossSpec`: params accept them and the new knob, the objective builds them, the search varies the
    declared knobs within their declared range, the help and the model card describe them."""
    run = subprocess.run([sys.executable, "-c", ADD_ONE], cwd=REPO, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    toy, huber = out["toy_relu_cos"], out["huber"]
    assert toy["kind"] == "cosine" and toy["loss"] == "CoSENTPlusCosine" and toy["finite"]
    assert toy["map"] == [5.0, 0.0]  # the cosine map it trains (cos_a, cos_b defaults)
    assert toy["uses"] == ["joint_lambda", "x0"]  # Translated ReLU's search varies no k
    assert "`toy_relu_cos` (x0 0.25, cosine map a=5, b=0, lambda 0.5)" in toy["card"]
    assert huber["kind"] == "head" and huber["loss"] == "Huber" and huber["finite"] and huber["map"] is None
    assert huber["uses"] == ["delta"] and "`huber` (delta 0.7)" in huber["card"]
    assert out["search_range"] == [0.5, 2.0] and "delta" in out["searched"] and "delta" not in out["fixed"]
    assert out["huber_delta"] == 1.0  # the declared default
    assert "huber: Huber loss on the head" in out["help"][0]


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


def test_every_stage2_loss_declares_what_it_reads_and_takes_exactly_that():
    """The objective hands a loss the inputs its ``reads`` names, in that order: each declared stage-2 loss names only
    what the model gives (the two embeddings, the head's score, the labels), and its forward takes as many."""
    import inspect

    import torch

    from stsreg.infra.loss_specs import STAGE2_LOSSES
    from stsreg.product.objective import Objective

    batch, d = 6, 4
    given = {"u": torch.randn(batch, d), "v": torch.randn(batch, d), "score": torch.rand(batch) * 5,
             "labels": torch.rand(batch) * 5}
    for name in STAGE2_LOSSES:
        objective = Objective(name)
        reads = objective.loss.reads
        assert set(reads) <= set(given) and len(set(reads)) == len(reads), (name, reads)
        assert len(inspect.signature(objective.loss.forward).parameters) >= len(reads), name
        assert torch.isfinite(objective(given["u"], given["v"], given["score"], given["labels"])), name

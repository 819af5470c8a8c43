"""The NLI objectives (value and gradient on hand-computed cases), their data and their resumable loop
(stsreg.product.training.nli), and the NLI table built on them."""

import math

import pandas as pd
import pytest
import torch

from stsreg.experiments import nli_table
from stsreg.product.training import nli as nli_training
from stsreg.infra.config import NliTableParams
from stsreg.infra.errors import InputError
from stsreg.product.model import SiameseRegressor
from tests.helpers.nli import grouped_nli

P = NliTableParams()


def test_every_params_objective_has_a_kind_and_the_params_list_them_all():
    from stsreg.infra import config

    assert tuple(nli_training.KINDS) == config.NLI_OBJECTIVES
    assert set(nli_table.PAPER_TABLE1) <= set(nli_training.KINDS) and nli_table.REFERENCE in nli_table.PAPER_TABLE1


def test_examples_per_kind():
    nli = grouped_nli(20)
    pairs = nli_training.training_examples(nli, "pair", 30, seed=1)
    assert len(pairs) == 30 and set(pairs.columns) == {"premise", "hypothesis", "label"}
    assert pairs.equals(nli_training.training_examples(nli, "pair", 30, seed=1))           # same seed, same sample
    triples = nli_training.training_examples(nli, "triple", 10, seed=1)
    assert len(triples) == 10 and list(triples.columns) == ["anchor", "positive", "negative"]
    lookup = nli.set_index(["premise", "hypothesis"]).label
    for t in triples.itertuples():  # positive = an entailment, negative = a contradiction of the same premise
        assert lookup[(t.anchor, t.positive)] == 2 and lookup[(t.anchor, t.negative)] == 0
    assert len(nli_training.training_examples(nli, "triple", 0, seed=1)) == 20               # 0 = one per premise
    sentences = nli_training.training_examples(nli, "sentence", 15, seed=1)
    assert len(sentences) == 15 and sentences.sentence.is_unique
    # no premise with both an entailment and a contradiction: a clear error, not a crash inside the training loop
    with pytest.raises(InputError, match=r"\(40 rows\) yields no triple example \(a premise with both"):
        nli_training.training_examples(nli[nli.label != 0].head(40), "triple", 0, seed=1)


def test_triplet_value_and_gradient_by_hand():
    # a=(0,0), p=(3,4), n=(1,0), margin 1: max(5 - 1 + 1, 0) = 5; d/da = (a-p)/|a-p| - (a-n)/|a-n| = (0.4, -0.8)
    loss = nli_training.NliObjective("triplet", 2, P).loss
    a = torch.zeros(1, 2, requires_grad=True)
    value = loss(a, torch.tensor([[3.0, 4.0]]), torch.tensor([[1.0, 0.0]]))
    value.backward()
    assert value.item() == pytest.approx(5.0, abs=1e-4)
    assert a.grad.tolist()[0] == pytest.approx([0.4, -0.8], abs=1e-4)
    # inside the margin: no loss, no gradient
    b = torch.zeros(1, 2, requires_grad=True)
    zero = loss(b, torch.tensor([[1.0, 0.0]]), torch.tensor([[3.0, 4.0]]))
    zero.backward()
    assert zero.item() == 0.0 and b.grad.abs().sum().item() == 0.0


def test_unsupervised_simcse_value_and_gradient_by_hand():
    # u = v = I (2 sentences, each its own positive), temperature 1: logits = I, loss = log(1 + e^-1) per row;
    # d/du0 = (I - u0 u0^T) * sum_j (softmax_j - onehot_j) v_j / 2 = (0, (1 - sigma) / 2), sigma = e / (e + 1)
    loss = nli_training.NliObjective("simcse_unsup", 2, NliTableParams(temperature=1.0)).loss
    u = torch.eye(2, requires_grad=True)
    value = loss(u, torch.eye(2))
    value.backward()
    sigma = math.e / (math.e + 1)
    assert value.item() == pytest.approx(math.log(1 + math.exp(-1)), rel=1e-5)
    assert u.grad[0].tolist() == pytest.approx([0.0, (1 - sigma) / 2], abs=1e-6)


def test_supervised_simcse_uses_the_contradiction_as_hard_negative():
    # one triple: anchor (1,0), positive (1,0), negative (0,1), temperature 1: logits (1, 0) -> log(1 + e^-1)
    # d/d anchor = sum_j (softmax_j - onehot_j) * d cos(a, x_j)/da = (1 - sigma) * (0, 1), sigma = e / (e + 1)
    loss = nli_training.NliObjective("simcse_sup", 2, NliTableParams(temperature=1.0)).loss
    anchor = torch.tensor([[1.0, 0.0]], requires_grad=True)
    value = loss(anchor, torch.tensor([[1.0, 0.0]]), torch.tensor([[0.0, 1.0]]))
    value.backward()
    assert value.item() == pytest.approx(math.log(1 + math.exp(-1)), rel=1e-5)
    assert anchor.grad[0].tolist() == pytest.approx([0.0, 1 - math.e / (math.e + 1)], abs=1e-6)
    # a negative closer to the anchor than the positive costs more
    worse = loss(torch.tensor([[1.0, 0.0]]), torch.tensor([[0.0, 1.0]]), torch.tensor([[1.0, 0.0]]))
    assert worse.item() == pytest.approx(math.log(1 + math.e), rel=1e-5)


def test_pair_rows_use_the_nli_labels_0_1_2(tiny_backbone):
    model = SiameseRegressor.from_pretrained(tiny_backbone, max_length=16)
    batch = grouped_nli(2)
    tables, labels = nli_training.tokenized_examples(model, batch)
    assert sorted(set(labels.tolist())) == [0, 1, 2]
    for name in ("softmax", "mse", "l1", "translated_relu", "smooth_k2"):
        objective = nli_training.NliObjective(name, model.dim, P)
        value = objective(model, tables, labels, list(range(len(batch))))
        assert value.ndim == 0 and torch.isfinite(value)
    # Smooth K2 on the head: zero inside the buffer |pred - label| < x0 = 0.25 (labels on the 0/1/2 scale)
    sk2 = nli_training.NliObjective("smooth_k2", model.dim, P).loss
    assert sk2(torch.tensor([1.2, 0.1]), torch.tensor([1.0, 0.0])).item() == 0.0
    assert sk2(torch.tensor([2.0]), torch.tensor([0.0])).item() > 0


def _weights(model):
    return torch.cat([p.detach().flatten() for p in model.parameters()])


def test_a_row_killed_mid_training_resumes_to_the_same_weights(tiny_backbone, tmp_path):
    from stsreg.product.training.checkpoint import CheckpointPlan

    every_step = lambda path: CheckpointPlan(path, every_steps=1)
    p = NliTableParams(batch_size=4, lr=1e-3)
    examples = nli_training.training_examples(grouped_nli(12), "triple", 12, seed=3)  # 3 steps

    def fresh():
        torch.manual_seed(0)
        return SiameseRegressor.from_pretrained(tiny_backbone, max_length=16)

    straight = fresh()
    nli_training.train_encoder(straight, "simcse_sup", examples, p, 3, every_step(tmp_path / "a.pt"))

    class Killed(Exception):
        pass

    def kill_at_2(key, value, step):
        if step == 2:
            raise Killed

    interrupted = fresh()
    with pytest.raises(Killed):
        nli_training.train_encoder(interrupted, "simcse_sup", examples, p, 3, every_step(tmp_path / "b.pt"),
                                   kill_at_2)
    resumed = fresh()
    summary = nli_training.train_encoder(resumed, "simcse_sup", examples, p, 3, every_step(tmp_path / "b.pt"))
    assert summary["steps"] == summary["total_steps"] == 3
    assert torch.equal(_weights(resumed), _weights(straight))
    assert not torch.equal(_weights(resumed), _weights(fresh()))  # it trained


def test_format_table_puts_the_paper_rows_beside_ours():
    row = {"method": "smooth_k2", "seeds": 1, **{f"{c}_{s}": 70.0 for c in
           ("sts12", "sts13", "sts14", "sts15", "sts16", "stsb", "sickr", "avg7", "avg7_unseen")
           for s in ("mean", "std", "low", "high")}}
    md = nli_table.format_table(pd.DataFrame([row]), None, [42], {"smooth_k2": 300.0}, "default")
    assert "| smooth_k2 | 70.00 |" in md and "| 5.0 |" in md
    assert (
        "| BERT + Smooth K2 (ours: smooth_k2) | 72.39 | 78.33 | 75.28 | 80.26 | 74.52 | 78.78 | 72.65 | 76.03 |" in md
    )

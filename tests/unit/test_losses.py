"""Loss values and gradients against hand-computed cases."""

import math

import pytest
import torch

from stsreg.product.losses import (
    L1,
    MSE,
    CoSENT,
    CosineMSE,
    InBatchContrastive,
    SmoothK2,
    SoftmaxCE,
    TranslatedReLU,
)
from stsreg.product.losses import build_loss, head_loss


def grad_of(loss, pred, label):
    p = torch.tensor([pred], requires_grad=True)
    loss(p, torch.tensor([label])).backward()
    return p.grad.item()


@pytest.mark.parametrize("cls", [SmoothK2, TranslatedReLU])
def test_zero_loss_and_gradient_inside_buffer(cls):
    loss = cls(x0=0.25, k=2.0)
    for pred in (1.0, 1.1, 0.9, 1.24, 0.76):
        p = torch.tensor([pred], requires_grad=True)
        value = loss(p, torch.tensor([1.0]))
        value.backward()
        assert value.item() == 0.0 and p.grad.item() == 0.0


def test_smooth_k2_values_and_gradient_outside():
    loss = SmoothK2(x0=0.2, k=3.0)
    # x = |2.0 - 1.0| = 1.0 -> 3 * 0.8^2 = 1.92; gradient 2k(x - x0) = 4.8, sign of (pred - label)
    assert loss(torch.tensor([2.0]), torch.tensor([1.0])).item() == pytest.approx(1.92)
    assert grad_of(loss, 2.0, 1.0) == pytest.approx(4.8)
    assert grad_of(loss, 0.0, 1.0) == pytest.approx(-4.8)
    # batch mean: one element inside the buffer contributes 0
    assert loss(torch.tensor([2.0, 1.1]), torch.tensor([1.0, 1.0])).item() == pytest.approx(0.96)


def test_smooth_k2_continuous_at_x0():
    loss = SmoothK2(x0=0.25, k=2.0)
    for eps in (1e-3, 1e-5):
        assert loss(torch.tensor([1.25 + eps]), torch.tensor([1.0])).item() == pytest.approx(0.0, abs=1e-5)
        assert abs(grad_of(loss, 1.25 + eps, 1.0)) < 1e-2


def test_translated_relu_values_and_gradient():
    loss = TranslatedReLU(x0=0.25, k=2.0)
    assert loss(torch.tensor([2.0]), torch.tensor([1.0])).item() == pytest.approx(1.5)
    assert grad_of(loss, 2.0, 1.0) == pytest.approx(2.0)
    assert grad_of(loss, -1.0, 1.0) == pytest.approx(-2.0)


def test_zero_negative_option():
    loss = SmoothK2(x0=0.25, k=2.0, zero_negative=True)
    assert loss(torch.tensor([-1.0]), torch.tensor([2.0])).item() == 0.0
    assert grad_of(loss, -1.0, 2.0) == 0.0
    assert SmoothK2(x0=0.25, k=2.0)(torch.tensor([-1.0]), torch.tensor([2.0])).item() == pytest.approx(2 * 2.75**2)


def test_mse_l1_and_factory():
    p, y = torch.tensor([1.0, 3.0]), torch.tensor([2.0, 3.0])
    assert MSE()(p, y).item() == pytest.approx(0.5)
    assert L1()(p, y).item() == pytest.approx(0.5)
    assert isinstance(head_loss("smooth_k2", 0.2, 3.0), SmoothK2)
    assert head_loss("smooth_k2", 0.2, 3.0).get_config_dict() == {"x0": 0.2, "k": 3.0, "zero_negative": False}
    assert isinstance(head_loss("mse", 0.2, 3.0), MSE)  # no buffer: the stage's x0 and k are not its knobs
    with pytest.raises(ValueError, match="unknown head loss"):
        head_loss("huber", 0.2, 3.0)
    with pytest.raises(ValueError, match="unknown head loss"):
        head_loss("smooth_k2_cos", 0.2, 3.0)  # a stage-2 loss on the cosine, not on the head
    # the declared defaults: stage 2's x0 and k (stsreg.infra.loss_specs), the only ones the code holds
    assert build_loss("smooth_k2").get_config_dict() == {"x0": 0.2, "k": 3.0, "zero_negative": False}
    with pytest.raises(ValueError, match="reads no"):
        build_loss("mse", x0=0.2)


def test_cosine_mse_scales_labels():
    u = torch.tensor([[1.0, 0.0], [1.0, 0.0]])
    v = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    # cos = [1, 0]; labels 5 and 0 on 0-5 map to 1 and 0 -> loss 0
    assert CosineMSE(0, 5)(u, v, torch.tensor([5.0, 0.0])).item() == pytest.approx(0.0)
    # SICK scale 1-5: label 3 -> 0.5
    assert CosineMSE(1, 5)(u[:1], v[:1], torch.tensor([3.0])).item() == pytest.approx(0.25)


def test_cosent_hand_computed():
    u = torch.tensor([[1.0, 0.0], [1.0, 0.0]])
    v = torch.tensor([[1.0, 0.0], [0.0, 1.0]])  # cos = [1, 0]
    right = CoSENT(scale=20.0)(u, v, torch.tensor([5.0, 0.0]))   # order agrees: log(1 + e^{-20})
    wrong = CoSENT(scale=20.0)(u, v, torch.tensor([0.0, 5.0]))   # order reversed: log(1 + e^{20})
    assert right.item() == pytest.approx(math.log1p(math.exp(-20)), abs=1e-6)
    assert wrong.item() == pytest.approx(math.log1p(math.exp(20)), rel=1e-5)


def test_in_batch_contrastive_with_and_without_hard_negatives():
    u = torch.eye(3)
    loss = InBatchContrastive(temperature=1.0)
    # sim row = [1, 0, 0] -> CE = -log(e / (e + 2))
    assert loss(u, u).item() == pytest.approx(-math.log(math.e / (math.e + 2)))
    assert loss(u, u, -u).item() == pytest.approx(-math.log(math.e / (math.e + 2 + 2 + math.exp(-1))))


def test_softmax_ce_shapes_and_value():
    ce = SoftmaxCE(dim=2)
    torch.nn.init.zeros_(ce.classifier.weight)
    torch.nn.init.zeros_(ce.classifier.bias)
    assert ce(torch.zeros(4, 6), torch.tensor([0, 1, 2, 1])).item() == pytest.approx(math.log(3))


def test_stage2_objective_reads_what_its_kind_needs():
    from stsreg.product.objective import Objective

    torch.manual_seed(0)
    u, v = torch.randn(4, 8), torch.randn(4, 8)
    score, labels = torch.tensor([0.0, 1.0, 4.0, 5.0]), torch.tensor([0.1, 1.5, 4.0, 2.0])
    head = Objective("smooth_k2", x0=0.2, k=3.0)
    assert head.kind == "head" and head(u, v, score, labels) == pytest.approx(SmoothK2(0.2, 3.0)(score, labels).item())
    pair = Objective("cosent")
    assert pair.kind == "pair" and pair(u, v, score, labels) == pytest.approx(CoSENT()(u, v, labels).item())
    con = Objective("contrastive", temperature=0.1, contrastive_min_label=4.0)
    assert con.kind == "contrastive" and con.min_label == 4.0
    assert con(u, v, score, labels) == pytest.approx(InBatchContrastive(0.1)(u, v).item())
    with pytest.raises(ValueError, match="unknown loss"):
        Objective("hinge")


def test_smooth_k2_on_cosine_value_and_gradient_by_hand():
    """pair 1: cos = 1/sqrt2, pred = 5 cos = 3.5355, label 2 -> x = 1.5355, outside x0 = 0.5: L = 2 (1.0355)^2;
    pair 2: cos = 0, pred 0, label 0.3 -> inside the buffer: L = 0, no gradient. Mean over the batch."""
    from stsreg.product.losses import AffineCosine

    u = torch.tensor([[1.0, 0.0], [1.0, 0.0]])
    v = torch.tensor([[1.0, 1.0], [0.0, 1.0]], requires_grad=True)
    labels = torch.tensor([2.0, 0.3])
    loss = AffineCosine(SmoothK2(x0=0.5, k=2.0), cos_a=5.0, cos_b=0.0)(u, v, labels)
    d = 5 / 2 ** 0.5 - 2 - 0.5
    assert loss.item() == pytest.approx(2 * d ** 2 / 2, rel=1e-5)
    loss.backward()
    # dL/dpred = 2k d / batch; dpred/dcos = a; dcos/dv = u/(|u||v|) - cos v/|v|^2 = (0.35355, -0.35355)
    g = 2 * 2.0 * d / 2 * 5.0 * (0.5 ** 0.5 - 0.5 ** 0.5 / 2)
    assert v.grad[0].tolist() == pytest.approx([g, -g], rel=1e-4)
    assert v.grad[1].tolist() == [0.0, 0.0]


def test_translated_relu_on_cosine_has_constant_slope_outside_the_buffer():
    from stsreg.product.losses import AffineCosine

    u = torch.tensor([[1.0, 0.0], [1.0, 0.0]])
    v = torch.tensor([[1.0, 1.0], [0.0, 1.0]], requires_grad=True)
    loss = AffineCosine(TranslatedReLU(x0=0.5, k=2.0), cos_a=5.0, cos_b=0.0)(u, v, torch.tensor([2.0, 0.3]))
    assert loss.item() == pytest.approx(2 * (5 / 2 ** 0.5 - 2.5) / 2, rel=1e-5)
    loss.backward()
    g = 2.0 / 2 * 5.0 * (0.5 ** 0.5 / 2)  # k / batch * a * dcos/dv
    assert v.grad[0].tolist() == pytest.approx([g, -g], rel=1e-4) and v.grad[1].tolist() == [0.0, 0.0]


def test_cosine_buffer_label_range_maps_cosine_onto_the_label_scale():
    """STS-B 0-5 with a=5, b=0: cos 1 -> 5, cos 0 -> 0. SICK-R 1-5 with a=2, b=3: cos -1 -> 1, cos 1 -> 5."""
    from stsreg.product.losses import AffineCosine

    u = torch.tensor([[1.0, 0.0], [1.0, 0.0]])
    sts = AffineCosine(SmoothK2(x0=0.0, k=1.0), cos_a=5.0, cos_b=0.0)
    assert sts(u, torch.tensor([[2.0, 0.0], [0.0, 3.0]]), torch.tensor([5.0, 0.0])).item() == pytest.approx(0.0,
                                                                                                            abs=1e-6)
    sick = AffineCosine(SmoothK2(x0=0.0, k=1.0), cos_a=2.0, cos_b=3.0)
    assert sick(u, torch.tensor([[1.0, 0.0], [-1.0, 0.0]]), torch.tensor([5.0, 1.0])).item() == pytest.approx(0.0,
                                                                                                              abs=1e-6)
    assert sick(u, torch.tensor([[0.0, 1.0], [0.0, 1.0]]), torch.tensor([3.0, 3.5])).item() == pytest.approx(0.25 / 2,
                                                                                                             rel=1e-5)


def test_joint_is_head_loss_plus_lambda_times_cosine_loss_by_hand():
    from stsreg.product.objective import Objective

    u = torch.tensor([[1.0, 0.0], [1.0, 0.0]])
    v = torch.tensor([[1.0, 1.0], [0.0, 1.0]], requires_grad=True)
    score = torch.tensor([3.0, 0.0], requires_grad=True)
    labels = torch.tensor([2.0, 0.3])
    joint = Objective("joint_smooth_k2", x0=0.5, k=2.0, cos_a=5.0, cos_b=0.0, joint_lambda=0.5)
    assert joint.kind == "joint"
    loss = joint(u, v, score, labels)
    head = 2 * (1.0 - 0.5) ** 2 / 2                      # pair 1: x = 1.0; pair 2 inside the buffer
    cosine = 2 * (5 / 2 ** 0.5 - 2.5) ** 2 / 2
    assert loss.item() == pytest.approx(head + 0.5 * cosine, rel=1e-5)
    loss.backward()
    assert score.grad.tolist() == pytest.approx([2 * 2.0 * 0.5 / 2, 0.0], rel=1e-5)  # only the head term
    g = 0.5 * 2 * 2.0 * (5 / 2 ** 0.5 - 2.5) / 2 * 5.0 * (0.5 ** 0.5 / 2)
    assert v.grad[0].tolist() == pytest.approx([g, -g], rel=1e-4)                   # only the cosine term, x lambda
    cos_only = Objective("translated_relu_cos", x0=0.5, k=2.0)
    assert cos_only.kind == "cosine" and cos_only(u, v, score,
                                                  labels).item() == pytest.approx(2 * (5 / 2 ** 0.5 - 2.5) / 2,
                                                                                  rel=1e-5)


def test_cosent_plus_cosine_buffer_is_cosent_plus_lambda_times_the_buffered_loss_by_hand():
    from stsreg.product.losses import AffineCosine
    from stsreg.product.objective import Objective

    u = torch.tensor([[1.0, 0.0], [1.0, 0.0]])
    labels = torch.tensor([0.3, 2.0])                    # the order disagrees with cos = [1/sqrt2, 0]: CoSENT pays

    def v():
        return torch.tensor([[1.0, 1.0], [0.0, 1.0]], requires_grad=True)

    obj = Objective("cosent_smooth_k2_cos", x0=0.5, k=2.0, cos_a=5.0, cos_b=0.0, joint_lambda=0.5)
    assert obj.kind == "cosine" and obj.score_map == [5.0, 0.0]   # head frozen; the served score is 5 cos
    va = v()
    loss = obj(u, va, None, labels)
    cosent = math.log1p(math.exp(20 / 2 ** 0.5))                  # exp(20 * (cos_1 - cos_2))
    buffered = (2 * (5 / 2 ** 0.5 - 0.3 - 0.5) ** 2 + 2 * (2.0 - 0.5) ** 2) / 2  # |5 cos - y| = 3.24, 2.0; both outside
    assert loss.item() == pytest.approx(cosent + 0.5 * buffered, rel=1e-5)
    loss.backward()
    vb, vc = v(), v()
    CoSENT()(u, vb, labels).backward()
    AffineCosine(SmoothK2(x0=0.5, k=2.0), 5.0, 0.0)(u, vc, labels).backward()
    assert torch.allclose(va.grad, vb.grad + 0.5 * vc.grad)           # the gradients add, the buffer's x lambda
    inside = Objective("cosent_translated_relu_cos", x0=0.5, k=2.0)
    y = torch.tensor([5 / 2 ** 0.5 + 0.4, 0.2])                      # both within x0 of 5 cos: only CoSENT is left
    only_cosent = CoSENT()(u, v(), y).item()
    assert only_cosent > 0 and inside(u, v(), None, y).item() == pytest.approx(only_cosent, rel=1e-6)


def test_objective_names_agree_with_the_params_choices():
    from stsreg.experiments import compare
    from stsreg.infra import config
    from stsreg.product import losses
    from stsreg.experiments.profiling import measure

    from stsreg.infra.loss_specs import LOSSES

    assert set(LOSSES) == set(config.STAGE2_LOSSES)
    assert all(hasattr(losses, spec.cls) for spec in LOSSES.values())  # every declared class exists
    assert set(config.HEAD_LOSSES) == {"smooth_k2", "translated_relu", "mse", "l1"}
    assert tuple(compare.METHODS) == config.COMPARE_METHODS and measure.METHODS == config.PROFILE_METHODS


def test_served_score_map_follows_what_the_objective_trains():
    from stsreg.product.objective import Objective

    assert Objective("smooth_k2").score_map is None  # the head is what head losses train
    assert Objective("smooth_k2_cos", cos_a=4.0, cos_b=1.0).score_map == [4.0, 1.0]
    assert Objective("joint_translated_relu", cos_a=2.5, cos_b=0.5).score_map == [2.5, 0.5]
    assert Objective("cosine_mse").score_map == [5.0, 0.0]  # MSE of cos vs label / 5
    assert Objective("cosent").score_map == [5.0, 0.0] and Objective("contrastive").score_map == [5.0, 0.0]


@pytest.mark.parametrize("cls", [SmoothK2, TranslatedReLU])
def test_buffered_losses_label_range_nli_0_1_2_and_sts_0_5(cls):
    """Labels are on the data's own scale. NLI 0/1/2 (gap 1): with the paper's x0 = 0.25 <= 1/2 a prediction half
    way to the next class is outside the buffer and pays; STS 0-5: labels anywhere in [0, 5] are hit exactly."""
    loss = cls(x0=0.25, k=2.0)
    for label in (0.0, 1.0, 2.0):
        assert loss(torch.tensor([label + 0.2]), torch.tensor([label])).item() == 0.0      # inside the buffer
        assert loss(torch.tensor([label + 0.5]), torch.tensor([label])).item() > 0.0       # half way to the next class
    labels = torch.tensor([0.0, 1.3, 2.6, 3.8, 5.0])
    assert loss(labels, labels).item() == 0.0


@pytest.mark.parametrize("cls", [MSE, L1])
def test_plain_regression_losses_take_any_label_scale(cls):
    for labels in (torch.tensor([0.0, 1.0, 2.0]), torch.tensor([0.0, 2.5, 5.0]), torch.tensor([1.0, 3.0, 5.0])):
        assert cls()(labels, labels).item() == 0.0 and cls()(labels + 1, labels).item() == pytest.approx(1.0)


def test_softmax_ce_label_range_is_the_class_index():
    ce = SoftmaxCE(dim=2)
    ce(torch.zeros(3, 6), torch.tensor([0, 1, 2]))                 # contradiction / neutral / entailment
    with pytest.raises(IndexError):
        ce(torch.zeros(1, 6), torch.tensor([3]))                   # no fourth class


def test_cosent_and_contrastive_ignore_the_label_scale():
    u, v = torch.randn(4, 8, generator=torch.Generator().manual_seed(0)), torch.randn(4, 8,
                                                                                      generator=torch.Generator().manual_seed(1))
    labels = torch.tensor([0.5, 4.0, 2.0, 3.0])
    # CoSENT uses only the order of the labels: an increasing map of the scale gives the same loss
    assert CoSENT()(u, v, labels).item() == pytest.approx(CoSENT()(u, v, 2 * labels + 1).item())
    # in-batch contrastive takes no labels at all (positives are the pairs it is given)
    assert InBatchContrastive()(u, v).ndim == 0

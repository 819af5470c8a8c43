"""The same text, the same vector: on every backend a sentence encoded alone and inside a large batch of other
requests' sentences (longer and shorter ones, so other padding and other activation ranges) agree to 1e-5 of its
norm. onnx-int8 quantises activations per token for this; a file quantised per tensor (a version registered before)
is served per token too."""

import numpy as np
import pytest

from tests.conftest import TINY_WORDS
from tests.helpers.backbones import exported_model, random_sentences

ALONE = 24


@pytest.fixture(scope="module")
def folder(tiny_backbone, tmp_path_factory):
    return exported_model(tiny_backbone, tmp_path_factory.mktemp("invariance") / "model", 48)


def _sentences(n: int, seed: int) -> list[str]:
    return random_sentences(TINY_WORDS, n, seed, 2, 40)


def _alone_and_in_company(model) -> tuple[np.ndarray, np.ndarray]:
    asked = _sentences(ALONE, 1)
    company = _sentences(300, 2)
    mixed = company[:150] + asked + company[150:]
    alone = np.stack([model.encode([s], 1, show_progress=False)[0].numpy() for s in asked])
    batched = model.encode(mixed, 64, show_progress=False).numpy()[150:150 + ALONE]
    return alone, batched


@pytest.mark.parametrize("backend", ["torch", "onnx", "onnx-int8"])
def test_a_sentence_gets_the_same_vector_alone_and_in_any_batch(folder, backend):
    from stsreg.product.model import SiameseRegressor
    from stsreg.product.serving import export as ex

    model = ex.use_backend(SiameseRegressor.load(folder, precision="fp32").eval(), backend, folder, 1)
    alone, batched = _alone_and_in_company(model)
    error = np.abs(alone - batched).max(axis=1) / np.linalg.norm(alone, axis=1)
    assert error.max() <= 1e-5, f"{backend}: a vector moved by {error.max():.2e} of its norm with its batch company"


def test_an_int8_file_quantised_per_tensor_is_served_per_token(folder, tmp_path):
    """A version registered with ONNX Runtime's per-tensor ranges (its vectors move with the batch) is rewritten at
    load: the same guarantee, and vectors close to the fp32 graph's."""
    import shutil

    from onnxruntime.quantization import QuantType, quantize_dynamic

    from stsreg.infra.backend_specs import BY_NAME
    from stsreg.product.model import SiameseRegressor
    from stsreg.product.serving import export as ex

    old = tmp_path / "old"
    shutil.copytree(folder, old)
    quantize_dynamic(str(old / BY_NAME["onnx"].file), str(old / BY_NAME["onnx-int8"].file),
                     weight_type=QuantType.QInt8, per_channel=True)
    model = ex.use_backend(SiameseRegressor.load(old, precision="fp32").eval(), "onnx-int8", old, 1)
    alone, batched = _alone_and_in_company(model)
    assert (np.abs(alone - batched).max(axis=1) / np.linalg.norm(alone, axis=1)).max() <= 1e-5
    fp32 = ex.use_backend(SiameseRegressor.load(folder, precision="fp32").eval(), "onnx", folder, 1)
    exact = _alone_and_in_company(fp32)[0]
    cosine = (alone * exact).sum(1) / np.linalg.norm(alone, axis=1) / np.linalg.norm(exact, axis=1)
    assert cosine.min() > 0.99


def test_a_server_runs_torch_in_fp32_on_a_bf16_cpu_unless_bf16_is_asked_for(monkeypatch):
    """``serve.precision: auto`` on a CPU with native bf16 is fp32 for the server (bf16 kernels there round a sentence
    differently with other sentences beside it: 4.06e-3 measured on an EPYC with AVX-512 + bf16); bf16 asked for by
    name is kept, and a GPU's auto is left to the probe."""
    import torch

    from stsreg.product import precision

    monkeypatch.setattr(precision, "native_bf16", lambda device: True)  # the rule, on any CPU; the kernels: below
    cpu = torch.device("cpu")
    assert precision.serving_precision("auto", cpu) == "fp32"
    assert precision.serving_precision("bf16", cpu) == "bf16" and precision.serving_precision("fp32", cpu) == "fp32"
    assert precision.serving_precision("auto", torch.device("cuda", 0)) == "auto"


def _native_bf16_cpu() -> bool:
    import torch

    from stsreg.product.precision import native_bf16

    return native_bf16(torch.device("cpu"))


@pytest.mark.skipif(not _native_bf16_cpu(), reason="CPU bf16 kernels exist only where the CPU has native bf16")
def test_the_served_default_holds_on_a_bf16_cpu(folder):
    """What ``stsreg serve`` runs by default on a bf16 CPU (torch, ``serve.precision: auto``): the same vector alone
    and in any batch, to 1e-5 of its norm."""
    import torch

    from stsreg.product.model import SiameseRegressor
    from stsreg.product.precision import serving_precision

    model = SiameseRegressor.load(folder, precision=serving_precision("auto", torch.device("cpu"))).eval()
    alone, batched = _alone_and_in_company(model)
    assert (np.abs(alone - batched).max(axis=1) / np.linalg.norm(alone, axis=1)).max() <= 1e-5


@pytest.mark.parametrize("backend", ["onnx", "onnx-int8"])
def test_the_onnx_sessions_do_not_spin(folder, backend):
    """ONNX Runtime's workers sleep between operators: a spinning pool takes the CPU the server's tokenizer thread
    and event loop need (docs/inference.md: measured faster served, on two cores)."""
    from stsreg.product.model import SiameseRegressor
    from stsreg.product.serving import export as ex

    model = ex.use_backend(SiameseRegressor.load(folder, precision="fp32").eval(), backend, folder, 1)
    options = model.runtime.session.get_session_options()
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"

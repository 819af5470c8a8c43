"""The serving backends, declared once: each one's name (``serve.backend``, ``--backend``, the version's tags, the
card), the module of :mod:`stsreg.product.serving.backends` that implements it (export / load / describe), the file
it adds to a registered model folder and one line of help. Params' choices, the command line's, the exports
registration writes and judges, what ``auto`` measures and the golden ``export`` case derive from :data:`BACKENDS`.
Adding a backend is one entry here and its module.

    >>> NAMES
    ('torch', 'onnx', 'onnx-int8')
    >>> BY_NAME["onnx-int8"].file
    'onnx/model_qint8.onnx'
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BackendSpec:
    """``name``: the backend's name everywhere; ``module``: its module under :mod:`stsreg.product.serving.backends`;
    ``file``: its file in a model folder, relative to it (None: it runs the saved weights themselves); ``help``: what
    runs, where, in which precision; ``computes``: the precision it computes in, as ``GET /metadata`` says it (None:
    the model's own, resolved where it runs)."""

    name: str
    module: str
    file: str | None
    help: str
    computes: str | None = None


#: In export order: the int8 copy quantises the fp32 graph, so it follows it.
BACKENDS: tuple[BackendSpec, ...] = (
    BackendSpec("torch", "torch_weights", None,
                "the saved weights in PyTorch, on this process's device (a GPU where there is one), in the model's "
                "precision"),
    BackendSpec("onnx", "onnx_fp32", "onnx/model.onnx",
                "the encoder exported to ONNX (fp32), run by ONNX Runtime on the CPU; pooling and head in torch",
                "fp32"),
    BackendSpec("onnx-int8", "onnx_int8", "onnx/model_qint8.onnx",
                "the ONNX graph with int8 weights and int8 activations quantised per token (a sentence's vector "
                "does not depend on its batch), run by ONNX Runtime on the CPU",
                "int8 weights and activations (per token)"),
)
BY_NAME: dict[str, BackendSpec] = {b.name: b for b in BACKENDS}
NAMES: tuple[str, ...] = tuple(BY_NAME)

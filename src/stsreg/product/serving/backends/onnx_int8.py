"""The ``onnx-int8`` backend: the ``onnx`` graph with its MatMul weights quantised to int8 per output channel and the
activations quantised on the fly (``onnxruntime.quantization.quantize_dynamic``): about 4x smaller, and faster on CPUs
with int8 dot products (AVX2 / AVX512-VNNI), at a quality cost that registration measures per model."""

from __future__ import annotations

from pathlib import Path

from stsreg.infra.backend_specs import BY_NAME
from stsreg.product.serving.backends.onnx_fp32 import export as export_fp32
from stsreg.product.serving.backends.onnx_fp32 import load  # noqa: F401 (the same runtime on the quantised graph)

#: The graph this backend quantises: the ``onnx`` backend's.
SOURCE = "onnx"


def export(folder: Path, out: Path) -> None:
    """Quantise ``folder``'s fp32 graph (the ``onnx`` backend's file, exported first when it is not there) into
    ``out``."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from stsreg.infra.quiet import quiet

    source = Path(folder) / BY_NAME[SOURCE].file
    if not source.is_file():
        export_fp32(folder, source)
    # the quantiser advises pre-processing (shape inference for static quantisation) through the root logger on
    # every call; dynamic quantisation does not use it, so the line is noise here and is dropped at its source
    with quiet(logs={"": ("Please consider to run pre-processing before quantization",)}):
        quantize_dynamic(str(source), str(out), weight_type=QuantType.QInt8, per_channel=True)

"""The ``onnx-int8`` backend: the ``onnx`` graph with its MatMul weights quantised per output channel to 7 bits
(``onnxruntime.quantization.quantize_dynamic``, ``reduce_range``) and its activations quantised on the fly **per
token** to 8 bits: each row of each MatMul's input gets its own scale (symmetric, uint8 around 128), so a sentence's
vector does not depend on what else is in its batch (ONNX Runtime's own dynamic quantisation takes one range per
tensor, padding and the other requests' tokens included: the same sentence's served vector moved by up to 0.13 per
component with its company). 7-bit weights keep every uint8 x int8 pair sum inside int16, so CPUs without VNNI
(AVX2's ``vpmaddubsw`` saturates there) compute the same integers as those with it. About 4x smaller than fp32, faster
on CPUs with int8 dot products, at a quality cost that registration measures per model.

Measured on all-MiniLM-L6-v2 (docs/inference.md, "int8 per token"), an AMD EPYC with AVX2 only, 2 threads: a
sentence alone and inside a batch of 64 give the same vector (max difference 0.0; 0.134 with per-tensor ranges);
avg7 78.76 against 78.71 per tensor and 78.88 for torch; 8-bit weights with 8-bit per-token activations scored 78.57.
"""

from __future__ import annotations

import logging
from pathlib import Path

from stsreg.infra.backend_specs import BY_NAME
from stsreg.product.serving.backends.onnx_fp32 import OnnxEncoder
from stsreg.product.serving.backends.onnx_fp32 import export as export_fp32
from stsreg.infra.quiet import quiet

log = logging.getLogger(__name__)

#: The graph this backend quantises: the ``onnx`` backend's.
SOURCE = "onnx"
_PER_TENSOR = "DynamicQuantizeLinear"  # ONNX Runtime's one-range-per-tensor activation quantiser


def export(folder: Path, out: Path) -> None:
    """Quantise ``folder``'s fp32 graph (the ``onnx`` backend's file, exported first when it is not there) into
    ``out``: 7-bit weights per output channel, 8-bit activations per token (:func:`per_token`)."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic


    source = Path(folder) / BY_NAME[SOURCE].file
    if not source.is_file():
        export_fp32(folder, source)
    # the quantiser advises pre-processing (shape inference for static quantisation) through the root logger on
    # every call; dynamic quantisation does not use it, so the line is noise here and is dropped at its source
    with quiet(logs={"": ("Please consider to run pre-processing before quantization",)}):
        quantize_dynamic(str(source), str(out), weight_type=QuantType.QInt8, per_channel=True, reduce_range=True)
    onnx.save(per_token(onnx.load(str(out)), levels=127), str(out))


def per_token(graph, levels: int):
    """An ONNX model (``onnx.ModelProto``) whose ``DynamicQuantizeLinear`` nodes (one scale and zero point for the
    whole input tensor) are replaced by per-row quantisation over the last axis: scale = max|x| / ``levels`` of each
    row (shape (..., 1)), q = x / scale + (levels + 1) as uint8, zero point levels + 1 (127: 8 bits; 63: 7 bits, for
    8-bit weights). The MatMulInteger and scale products that consume them broadcast the (..., 1) scale unchanged.
    Returns the model, changed in place."""
    from onnx import TensorProto, helper, numpy_helper
    import numpy as np

    g = graph.graph
    g.initializer.extend([numpy_helper.from_array(np.array(v, dtype), name) for name, v, dtype in (
        ("per_token_inv_levels", 1 / levels, np.float32), ("per_token_eps", 1e-8, np.float32),
        ("per_token_one", 1.0, np.float32), ("per_token_zp", levels + 1, np.uint8))])
    nodes = []
    for n in g.node:
        if n.op_type != _PER_TENSOR:
            nodes.append(n)
            continue
        x, (q, scale, zero) = n.input[0], n.output
        p = f"{n.name}_per_token_"
        nodes += [helper.make_node("Abs", [x], [p + "abs"]),
                  helper.make_node("ReduceMax", [p + "abs"], [p + "max"], keepdims=1, axes=[-1]),
                  helper.make_node("Max", [p + "max", "per_token_eps"], [p + "range"]),  # an all-zero row: no 0/0
                  helper.make_node("Mul", [p + "range", "per_token_inv_levels"], [scale]),
                  helper.make_node("Reciprocal", [scale], [p + "inv"]),
                  helper.make_node("Mul", [x, p + "inv"], [p + "unit"]),
                  # rounds and saturates in one op: |unit| <= levels, so q = round(unit) + levels + 1, in
                  # [1, 2 levels + 1]
                  helper.make_node("QuantizeLinear", [p + "unit", "per_token_one", "per_token_zp"], [q]),
                  helper.make_node("Identity", ["per_token_zp"], [zero])]
    del g.node[:]
    g.node.extend(nodes)
    return graph


def load(model, file: Path | None, threads: int):
    """``model`` with its encoder run by ONNX Runtime on ``file``, on the CPU. A file written before activations
    were quantised per token (one range per batch, 8-bit weights) is rewritten in memory first, with 7-bit activations
    (their pair sums stay inside int16 beside 8-bit weights), so every served version answers a sentence the same
    whatever shares its batch."""
    import onnx

    graph = onnx.load(str(file))
    if any(n.op_type == _PER_TENSOR for n in graph.graph.node):
        log.info("%s quantises activations per tensor; serving it per token (batch-invariant)", file)
        model.runtime = OnnxEncoder(file, threads, graph=per_token(graph, levels=63).SerializeToString())
    else:
        model.runtime = OnnxEncoder(file, threads)
    return model.to("cpu")

"""The ``onnx`` backend: the encoder exported to ONNX (fp32), run by ONNX Runtime on the CPU.

Its file (``onnx/model.onnx``, the sentence-transformers layout, beside the weights): inputs ``input_ids``,
``attention_mask`` (and ``token_type_ids`` where the tokenizer makes them), int64 of shape (batch, seq); output
``last_hidden_state`` (batch, seq, d) float32. Pooling and the head stay in torch
(:meth:`~stsreg.product.model.SiameseRegressor.embed`), so every backend pools alike. ONNX Runtime optimises the graph
for the host when a session loads it (``ORT_ENABLE_ALL``); the offline transformer optimiser (fused attention) is not
used: on a Xeon with AMX at 2 threads its graph encoded the STS-B test sentences at 0.96x torch fp32 against 1.07x for
the plain export, and its int8 copy at 2.05x against 2.44x.

Made with torch's own exporter (``torch.onnx.export``, TorchScript path): optimum, which sentence-transformers'
``backend="onnx"`` needs, does not install beside transformers 5. The export traces a fresh copy of the model loaded
from the folder: a model that ``torch.onnx.export`` has traced scores differently when used again in torch in the same
process (measured: 79.74 instead of 82.03 on STS-B test).
"""

from __future__ import annotations

import os
from pathlib import Path
from stsreg.infra.quiet import quiet

OPSET = 17
_AXES = {0: "batch", 1: "seq"}


def export(folder: Path, out: Path) -> None:
    """Trace the encoder, loaded afresh from ``folder`` in fp32, once on a batch of two sentences with dynamic batch
    and sequence axes, into ``out``."""
    import torch

    from stsreg.product.model import SiameseRegressor

    class Hidden(torch.nn.Module):
        """The encoder as the graph sees it: token ids (+ mask, + token types) -> last hidden states."""

        def __init__(self, encoder, names: list[str]):
            super().__init__()
            self.encoder, self.names = encoder, names

        def forward(self, *inputs):
            return self.encoder(**dict(zip(self.names, inputs))).last_hidden_state

    model = SiameseRegressor.load(folder, precision="fp32").eval()
    sample = model.tokenize(["A man is playing a guitar on the stage.", "Someone plays music."])
    names = [n for n in ("input_ids", "attention_mask", "token_type_ids") if n in sample]
    out.parent.mkdir(parents=True, exist_ok=True)
    # the tracer's advice on Python booleans and advanced indexing (shapes are dynamic axes here, checked by scoring
    # the export on the evaluation's pairs at registration) is noise in a run's log; other warnings still show
    with torch.no_grad(), quiet(warnings=("Exporting aten::index operator",), categories=(torch.jit.TracerWarning,)):
        torch.onnx.export(Hidden(model.encoder, names), tuple(sample[n] for n in names), str(out),
                          input_names=names, output_names=["last_hidden_state"], opset_version=OPSET,
                          dynamic_axes={**{n: _AXES for n in names}, "last_hidden_state": _AXES}, dynamo=False)


class OnnxEncoder:
    """An ONNX Runtime session as :attr:`SiameseRegressor.runtime`: a tokenized batch (torch tensors) -> its (batch,
    seq, d) float32 last hidden states. ``threads``: intra-op threads (0: ONNX Runtime's default, the physical
    cores). ``graph``: the serialised model to run instead of ``path``'s bytes (``path`` still names it)."""

    def __init__(self, path: str | os.PathLike, threads: int = 0, graph: bytes | None = None):
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # its worker threads sleep between operators instead of spinning: on two cores a spinning pool takes the CPU
        # the server's tokenizer thread and event loop need (served, A/B in 3 alternating rounds on an EPYC with
        # AVX2: +7% req/s at 8 clients, +6% at 32, +22% on long texts at 1 client, never slower beyond the noise)
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.path = Path(path)
        # ONNX Runtime 1.32's MatMulIntegerToFloat fusion reads a per-row activation scale (onnx-int8's, shape
        # (..., 1)) as one scale: 5x the error (measured); without it the int8 graph runs 3-10% slower, correct
        self.session = ort.InferenceSession(graph or str(path), options, providers=["CPUExecutionProvider"],
                                            disabled_optimizers=["MatMulIntegerToFloatFusion"])
        self.inputs = [i.name for i in self.session.get_inputs()]

    def __call__(self, features: dict):
        import torch

        feed = {n: features[n].cpu().numpy() for n in self.inputs}
        return torch.from_numpy(self.session.run(None, feed)[0])


def load(model, file: Path | None, threads: int):
    """``model`` with its encoder run by an ONNX Runtime session of ``file``, on the CPU (where its head and pooling
    then stay)."""
    model.runtime = OnnxEncoder(file, threads)
    return model.to("cpu")

"""Exported encoders: ONNX (fp32, graph-optimised) and dynamically quantised int8 ONNX, run by ONNX Runtime.

A model folder (:meth:`stsreg.product.model.SiameseRegressor.save`) gains, in the sentence-transformers layout
(``onnx/`` beside the weights):

- ``onnx/model.onnx``: the encoder as exported. Inputs ``input_ids``, ``attention_mask`` (and ``token_type_ids``
  where the tokenizer makes them), int64 of shape (batch, seq); output ``last_hidden_state`` (batch, seq, d) float32.
  Pooling and the head stay in torch (:meth:`~stsreg.product.model.SiameseRegressor.embed`), so every backend pools
  alike. ONNX Runtime optimises the graph for the host when a session loads it (``ORT_ENABLE_ALL``); the offline
  transformer optimiser (fused attention) is not used: on a Xeon with AMX at 2 threads its graph encoded the STS-B
  test sentences at 0.96x torch fp32 against 1.07x for the plain export, and its int8 copy at 2.05x against 2.44x.
- ``onnx/model_qint8.onnx``: the same graph with its MatMul weights quantised to int8 per output channel and the
  activations quantised on the fly (``onnxruntime.quantization.quantize_dynamic``): about 4x smaller, and faster on
  CPUs with int8 dot products (AVX2 / AVX512-VNNI), at a quality cost that must be measured per model.
- ``onnx/backends.json``: per backend its avg7 and drop against torch, and whether the version may serve it
  (:func:`judge`), written at registration.

Made with torch's own exporter (``torch.onnx.export``, TorchScript path) and ONNX Runtime's quantiser: optimum, which sentence-transformers' ``backend="onnx"`` needs, does not install beside transformers 5.
The export traces a fresh copy of the model loaded from the folder: a model that ``torch.onnx.export`` has traced
scores differently when used again in torch in the same process (measured: 79.74 instead of 82.03 on STS-B test).

    >>> files = export_onnx("models/stage2")                 # {"onnx": .../onnx/model.onnx, "onnx-int8": ...}
    >>> m = SiameseRegressor.load("models/stage2"); use_backend(m, "onnx-int8", "models/stage2")
    >>> m.encode(["A man plays a guitar."])                  # (1, 384) float32, computed by ONNX Runtime
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import torch

from stsreg.infra.quiet import quiet

log = logging.getLogger(__name__)

#: Backend -> its file in a model folder (``torch`` runs the safetensors weights).
FILES = {"onnx": "onnx/model.onnx", "onnx-int8": "onnx/model_qint8.onnx"}
BACKENDS = ("torch", *FILES)
QUALITY = "onnx/backends.json"
OPSET = 17
_AXES = {0: "batch", 1: "seq"}


class _Hidden(torch.nn.Module):
    """The encoder as the exported graph sees it: token ids (+ mask, + token types) -> last hidden states."""

    def __init__(self, encoder, names: list[str]):
        super().__init__()
        self.encoder, self.names = encoder, names

    def forward(self, *inputs):
        return self.encoder(**dict(zip(self.names, inputs))).last_hidden_state


def export_onnx(model_dir: str | os.PathLike, int8: bool = True) -> dict[str, Path]:
    """Write ``onnx/model.onnx`` (and ``onnx/model_qint8.onnx``) into ``model_dir``; returns backend -> file.

    The encoder is loaded afresh from ``model_dir`` in fp32 and traced once on a batch of two sentences with dynamic
    batch and sequence axes; the quantiser writes the int8 copy of that graph."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from stsreg.product.model import SiameseRegressor

    folder = Path(model_dir)
    model = SiameseRegressor.load(folder, precision="fp32").eval()
    sample = model.tokenize(["A man is playing a guitar on the stage.", "Someone plays music."])
    names = [n for n in ("input_ids", "attention_mask", "token_type_ids") if n in sample]
    out = {b: folder / f for b, f in FILES.items() if int8 or b == "onnx"}
    out["onnx"].parent.mkdir(parents=True, exist_ok=True)
    # the tracer's advice on Python booleans and advanced indexing (shapes are dynamic axes here, checked by scoring
    # the export on the evaluation's pairs at registration) is noise in a run's log; other warnings still show
    with torch.no_grad(), quiet(warnings=("Exporting aten::index operator",), categories=(torch.jit.TracerWarning,)):
        torch.onnx.export(_Hidden(model.encoder, names), tuple(sample[n] for n in names), str(out["onnx"]),
                          input_names=names, output_names=["last_hidden_state"], opset_version=OPSET,
                          dynamic_axes={**{n: _AXES for n in names}, "last_hidden_state": _AXES}, dynamo=False)
    del model  # traced: never used again in torch
    if "onnx-int8" in out:
        # the quantiser advises pre-processing (shape inference for static quantisation) through the root logger on
        # every call; dynamic quantisation does not use it, so the line is noise here and is dropped at its source
        with quiet(logs={"": ("Please consider to run pre-processing before quantization",)}):
            quantize_dynamic(str(out["onnx"]), str(out["onnx-int8"]), weight_type=QuantType.QInt8, per_channel=True)
    log.info("exported %s", ", ".join(f"{b}: {p} ({p.stat().st_size / 2**20:.1f} MiB)" for b, p in out.items()))
    return out


class OnnxEncoder:
    """An ONNX Runtime session as :attr:`SiameseRegressor.runtime`: a tokenized batch (torch tensors) -> its (batch, seq,
    d) float32 last hidden states. ``threads``: intra-op threads (0: ONNX Runtime's default, the physical cores)."""

    def __init__(self, path: str | os.PathLike, threads: int = 0):
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.path = Path(path)
        self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self.inputs = [i.name for i in self.session.get_inputs()]

    def __call__(self, features: dict[str, torch.Tensor]) -> torch.Tensor:
        feed = {n: features[n].cpu().numpy() for n in self.inputs}
        return torch.from_numpy(self.session.run(None, feed)[0])


def available(model_dir: str | os.PathLike) -> list[str]:
    """The backends a model folder holds files for (torch always)."""
    return ["torch", *(b for b, f in FILES.items() if (Path(model_dir) / f).is_file())]


def use_backend(model, backend: str, model_dir: str | os.PathLike, threads: int = 0):
    """Run ``model``'s encoder on ``backend`` (torch | onnx | onnx-int8) from now on; the ONNX files are read from
    ``model_dir`` (the folder ``model`` was loaded from). torch runs on this process's device (a GPU where there is
    one) in the model's ``precision``; the ONNX backends compute in fp32 on the CPU (the model, whose head and pooling
    stay in torch, moves there). Returns ``model``."""
    from stsreg.infra.errors import InputError

    if backend == "torch":
        from stsreg.infra.runtime import resolve_device

        model.runtime = None
        if threads:
            torch.set_num_threads(threads)
        return model.to(resolve_device())
    if backend not in FILES:
        raise InputError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    path = Path(model_dir) / FILES[backend]
    if not path.is_file():
        raise InputError(f"{model_dir} has no {FILES[backend]}: this version was registered without ONNX exports "
                         "(register it again, or serve it with --backend torch)")
    model.runtime = OnnxEncoder(path, threads)
    return model.to("cpu")


#: Sentences :func:`choose` times each backend on: STS-like lengths, short to long (what serving mostly sees).
PROBE = ["A man is playing a guitar.", "Two dogs run through a field of tall grass near the river.",
         "The committee said on Tuesday that it would review the proposal before the end of the year, officials said.",
         "A woman slices an onion.", "Stocks fell sharply in early trading as investors weighed the latest "
         "inflation figures and the central bank's signals about interest rates.", "Kids play football.",
         "How do I reset my password if I no longer have access to the email address on my account?",
         "The cat sleeps."] * 4
#: How requests arrive at a server: batches of this many sentences under load (the batcher's budget), one at a time
#: when idle.
PROBE_BATCH, PROBE_SINGLE = 256, 16


def measure(model, sentences: list[str] | None = None) -> dict[str, float]:
    """``{"sentences_s", "batch1_p50_ms"}`` of ``model`` on its current backend: the best of three passes over
    :data:`PROBE_BATCH` sentences in one call (throughput under load), and the median of :data:`PROBE_SINGLE` one-sentence
    calls (latency when idle); one warm-up pass of each first."""
    import statistics
    import time

    batch = (sentences or PROBE * (PROBE_BATCH // len(PROBE) + 1))[:PROBE_BATCH]
    model.encode(batch, batch_size=64, show_progress=False)
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        model.encode(batch, batch_size=64, show_progress=False)
        best = min(best, time.perf_counter() - start)
    single = []
    for s in [PROBE[0]] + PROBE[:PROBE_SINGLE]:
        start = time.perf_counter()
        model.encode([s], batch_size=1, show_progress=False)
        single.append((time.perf_counter() - start) * 1000)
    return {"sentences_s": len(batch) / best, "batch1_p50_ms": statistics.median(single[1:])}


def choose(model, model_dir: str | os.PathLike, threads: int = 0) -> tuple[str, dict[str, dict]]:
    """``serve.backend: auto``: torch where a GPU is (the model moves there); on a CPU each backend the folder may
    serve (:func:`servable`) is measured as requests arrive (:func:`measure`: batched throughput and batch-1 latency)
    and the one with the most sentences per second in batches runs from then on (under load, the batcher hands the
    encoder full batches). Returns (backend, {backend: measurements})."""
    if torch.cuda.is_available():
        use_backend(model, "torch", model_dir, threads)
        return "torch", {}
    rates = {}
    for backend in servable(model_dir):
        use_backend(model, backend, model_dir, threads)
        rates[backend] = measure(model)
    fastest = max(rates, key=lambda b: rates[b]["sentences_s"])
    use_backend(model, fastest, model_dir, threads)
    log.info("backend auto: %s (measured here: %s)", fastest, describe_rates(rates))
    return fastest, rates


def describe_rates(rates: dict[str, dict]) -> str:
    """``torch 612/s batched, p50 9.1 ms alone; onnx ...``: what :func:`choose` measured, for the start line."""
    return "; ".join(f"{b} {r['sentences_s']:.0f}/s batched, p50 {r['batch1_p50_ms']:.1f} ms alone" for b, r in rates.items())


def judge(avg7: dict[str, float], max_drop: float) -> dict[str, dict]:
    """Backend -> ``{avg7, drop, serving, reason}``: an exported backend serves only if its avg7 is at most
    ``max_drop`` below torch's (``avg7["torch"]``, the evaluated model)."""
    base = avg7["torch"]
    out = {"torch": {"avg7": base, "drop": 0.0, "serving": True, "reason": "the evaluated model"}}
    for backend, score in avg7.items():
        if backend == "torch":
            continue
        drop = base - score
        ok = drop <= max_drop
        out[backend] = {"avg7": score, "drop": drop, "serving": ok,
                        "reason": (f"avg7 drop {drop:.2f} <= bound {max_drop:g}" if ok else
                                   f"kept out of serving: avg7 drop {drop:.2f} > bound {max_drop:g} (serve.max_avg7_drop)")}
    return out


def read_quality(model_dir: str | os.PathLike) -> dict[str, dict]:
    """``onnx/backends.json`` of a registered model folder ({} when the folder has none)."""
    path = Path(model_dir) / QUALITY
    return json.loads(path.read_text()) if path.is_file() else {}


def servable(model_dir: str | os.PathLike, unjudged: bool = False) -> list[str]:
    """The backends the folder may run: torch, and each exported one whose registration judged it within the
    quality bound. ``unjudged``: whether an export never judged may run too (no for serving, which promises the card's
    scores; yes for ``stsreg encode`` on a folder a user exported and asks for by name)."""
    quality = read_quality(model_dir)
    return [b for b in available(model_dir) if b == "torch" or quality.get(b, {}).get("serving", unjudged)]

"""Does OpenVINO run the champion's encoder faster than ONNX Runtime here? (docs/inference.md, "OpenVINO").

OpenVINO is not in the project's lock (the issue asked for it only where it measures better), so the measurement runs
in a venv of its own, on token batches this project's venv prepares:

    .venv/bin/python benchmarks/openvino_check.py prepare --model FOLDER --out /tmp/ov_batches.npz
    python3 -m venv /tmp/ov && /tmp/ov/bin/pip install openvino onnxruntime numpy scipy
    /tmp/ov/bin/python benchmarks/openvino_check.py measure --model FOLDER --batches /tmp/ov_batches.npz \\
        --out reports/benchmarks-openvino.json

FOLDER is a registered folder (with ``onnx/model.onnx`` and ``onnx/model_qint8.onnx``). The batches are the distinct
STS-B test sentences sorted by length, 64 per batch, at the evaluated 256 tokens. Each engine encodes all of them three
times at 2 threads (median sentences/s) and its mean-pooled embeddings are scored on the STS-B test pairs (Spearman x100
of the cosine): ONNX Runtime fp32 and int8 (what serving runs), OpenVINO fp32 on ``model.onnx`` and OpenVINO on the
int8 graph ONNX Runtime's quantiser wrote.
"""

from __future__ import annotations

import argparse
import json
import platform
import signal
import statistics
import time

import numpy as np

THREADS = 2


def _cpu() -> str:
    """The CPU model and whether it has native bf16 / int8 dot products (what decides these ratios)."""
    try:
        info = open("/proc/cpuinfo").read()
    except OSError:
        return platform.processor() or platform.machine()
    name = next((line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("model name")), "?")
    flags = set(next((line.split(":", 1)[1].split() for line in info.splitlines() if line.startswith("flags")), []))
    have = [f for f in ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_int8") if f in flags]
    return f"{name} ({', '.join(have)})"


def prepare(model: str, out: str, sts: str = "data/prepared/sts.parquet") -> None:
    import pandas as pd
    from transformers import AutoTokenizer

    t = pd.read_parquet(sts)
    t = t[(t.dataset == "stsb") & (t.split == "test")]
    sents = sorted(set(t.sentence1) | set(t.sentence2))
    tok = AutoTokenizer.from_pretrained(model)
    sents = sorted(sents, key=lambda s: len(tok(s)["input_ids"]))
    arrays = {}
    for i in range(0, len(sents), 64):
        enc = tok(sents[i:i + 64], padding=True, truncation=True, max_length=256, return_tensors="np")
        arrays.update({f"{i // 64}:{k}": v.astype(np.int64) for k, v in enc.items()})
    idx = {s: i for i, s in enumerate(sents)}
    np.savez(out, **arrays, pair_a=np.array([idx[s] for s in t.sentence1]),
             pair_b=np.array([idx[s] for s in t.sentence2]),
             score=t.score.to_numpy())
    print(f"{len(sents)} sentences, {len(t)} pairs -> {out}")


def _ort(path: str):
    """An ONNX Runtime session at :data:`THREADS` threads as a function of a token batch -> hidden states."""
    import onnxruntime as rt

    o = rt.SessionOptions()
    o.intra_op_num_threads = THREADS
    o.graph_optimization_level = rt.GraphOptimizationLevel.ORT_ENABLE_ALL
    s = rt.InferenceSession(path, o, providers=["CPUExecutionProvider"])
    inputs = [i.name for i in s.get_inputs()]
    return lambda b: s.run(None, {n: b[n] for n in inputs})[0]


def _openvino(path: str, hint: str | None = None):
    """An OpenVINO compiled model (CPU, :data:`THREADS` threads, latency hint) as the same kind of function."""
    import openvino as ov

    cfg = {"INFERENCE_NUM_THREADS": THREADS, "PERFORMANCE_HINT": "LATENCY"}
    if hint:
        cfg["INFERENCE_PRECISION_HINT"] = hint
    compiled = ov.Core().compile_model(path, "CPU", cfg)
    inputs = [i.get_any_name() for i in compiled.inputs]
    req = compiled.create_infer_request()
    return lambda b: req.infer({n: b[n] for n in inputs})[0].copy()


def _too_long(*_):
    raise TimeoutError("over 240 s")


def measure(model: str, batches_path: str, out: str) -> None:
    from scipy.stats import spearmanr

    data = np.load(batches_path)
    nb = max(int(k.split(":")[0]) for k in data.files if ":" in k) + 1
    names = ("input_ids", "attention_mask", "token_type_ids")
    batches = [{n: data[f"{i}:{n}"] for n in names if f"{i}:{n}" in data.files} for i in range(nb)]
    n_sent = sum(b["input_ids"].shape[0] for b in batches)

    def stsb(embs):
        e = embs / np.linalg.norm(embs, axis=1, keepdims=True)
        return float(100 * spearmanr((e[data["pair_a"]] * e[data["pair_b"]]).sum(1), data["score"]).statistic)

    engines = {"onnxruntime fp32": lambda: _ort(f"{model}/onnx/model.onnx"),
               "onnxruntime int8": lambda: _ort(f"{model}/onnx/model_qint8.onnx"),
               "openvino fp32 (model.onnx)": lambda: _openvino(f"{model}/onnx/model.onnx", "f32"),
               "openvino (model_qint8.onnx)": lambda: _openvino(f"{model}/onnx/model_qint8.onnx")}
    signal.signal(signal.SIGALRM, _too_long)
    rows = {}
    for name, make in engines.items():
        signal.alarm(240)
        try:
            run = make()
            masks = [b["attention_mask"][..., None].astype(np.float32) for b in batches]
            embs = np.concatenate([(run(b) * m).sum(1) / np.clip(m.sum(1), 1e-9, None) for b, m in zip(batches, masks)])
            times = []
            for _ in range(3):
                start = time.perf_counter()
                for b in batches:
                    run(b)
                times.append(time.perf_counter() - start)
            rows[name] = {"sent_per_s": round(n_sent / statistics.median(times), 1), "stsb_test": round(stsb(embs), 2)}
        except Exception as exc:  # an engine that cannot run a graph in time is a result too
            rows[name] = {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
        signal.alarm(0)
        print(name, rows[name], flush=True)
    _write(rows, n_sent, out)


def _write(rows: dict, n_sent: int, out: str) -> None:
    import onnxruntime
    import openvino

    base = rows["onnxruntime fp32"].get("sent_per_s")
    for r in rows.values():
        if base and "sent_per_s" in r:
            r["x_onnxruntime_fp32"] = round(r["sent_per_s"] / base, 2)
    report = {"cpu": _cpu(), "threads": THREADS, "openvino": openvino.__version__,
              "onnxruntime": onnxruntime.__version__, "sentences": n_sent, "rows": rows}
    with open(out, "w") as fh:
        json.dump(report, fh, indent=2)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("mode", choices=["prepare", "measure"])
    ap.add_argument("--model", required=True, help="a registered folder (with onnx/)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--batches", help="measure: the .npz that prepare wrote")
    a = ap.parse_args()
    prepare(a.model, a.out) if a.mode == "prepare" else measure(a.model, a.batches, a.out)

"""Inference benchmark (``make bench-inference``, part of ``make bench``): every way to run the champion's encoder.

Rows, each at the same thread count, on one model folder (default: the registered champion, exports included):
torch fp32, torch bf16 autocast, ONNX fp32, ONNX int8 (:mod:`stsreg.product.serving.export`), and sentence-transformers'
``SentenceTransformer.encode`` of the same folder in fp32 and in bf16 autocast. Per row and text set:

- throughput: sentences/s at batch 64, the texts sorted by length as every encoder here batches them (median of
  ``--repeats`` passes after a warm-up pass);
- latency: p50 / p95 ms of one sentence per call (batch 1) over ``--latency-n`` sentences in input order;
- quality: STS-B test Spearman x100 of the cosine (computed from the short set's throughput pass), and avg7 where the
  registration scored the backend (``onnx/backends.json``: torch, ONNX fp32 and int8).

Text sets: *short* = the distinct STS-B test sentences; *long* = those sentences joined in order into passages
of at least 128 tokens (truncated at the model's maximum length). Then the served latency: ``stsreg serve``'s app
(:func:`stsreg.product.serving.serve.build_app`, called in-process through a test client, MLflow's scoring included)
answering one pair per request, backend torch fp32 (what was served before backends existed) against ``auto``.

Writes ``reports/benchmarks-inference.{md,json}`` (``--device cuda``: ``-cuda``; torch rows on the GPU, the ONNX rows
on the host's cores, onnxruntime's CPU provider).

    python -m benchmarks.inference --repeats 3          # or: make bench-inference (after make run)
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from benchmarks.bench_report import machine, median, sync
from benchmarks.inference_report import LONG_TOKENS, SETS, format_report


def texts(sts_path: Path, tokenizer, max_length: int) -> tuple[dict[str, list[str]], pd.DataFrame]:
    """({set: sentences}, the STS-B test pairs)."""
    sts = pd.read_parquet(sts_path)
    test = sts[(sts.dataset == "stsb") & (sts.split == "test")]
    short = list(dict.fromkeys([*test.sentence1, *test.sentence2]))
    long, buf = [], []
    for s in short:
        buf.append(s)
        if len(tokenizer(" ".join(buf))["input_ids"]) >= LONG_TOKENS:
            long.append(" ".join(buf))
            buf = []
    return {"short": short, "long": long}, test


class StRow:
    """sentence-transformers' encode of the same folder, as a row (``bf16``: under torch's autocast)."""

    def __init__(self, folder: Path, device: str, bf16: bool, max_length: int):
        from sentence_transformers import SentenceTransformer

        self.st = SentenceTransformer(str(folder), device=device)
        self.st.max_seq_length = max_length
        self.device, self.bf16 = device, bf16

    def encode(self, sentences, batch_size=64, show_progress=False):
        with torch.autocast(self.device.split(":")[0], dtype=torch.bfloat16, enabled=self.bf16):
            return torch.from_numpy(np.asarray(self.st.encode(sentences, batch_size=batch_size), dtype=np.float32))


#: Why the bf16 rows are left out on a CPU without native bf16 (autocast then emulates it, many times slower than fp32).
NO_BF16 = "no native bf16 on this CPU: autocast would emulate it; `precision: auto` never runs it here"


def rows(folder: Path, device: str, threads: int) -> dict:
    """name -> an object with ``encode(sentences, batch_size, show_progress)`` (bf16 rows only where bf16 is native)."""
    from stsreg.product.serving import export
    from stsreg.product.model import SiameseRegressor
    from stsreg.product.precision import native_bf16

    bf16 = native_bf16(torch.device(device))
    out = {}
    for name, backend, precision in (("torch fp32", "torch", "fp32"), ("torch bf16", "torch", "bf16"),
                                     ("onnx fp32", "onnx", "fp32"), ("onnx int8", "onnx-int8", "fp32")):
        if backend in export.available(folder) and (precision == "fp32" or bf16):
            model = export.use_backend(SiameseRegressor.load(folder, precision=precision).eval(), backend, folder,
                                       threads)
            out[name] = model.to(device) if backend == "torch" else model
    max_length = out["torch fp32"].config.max_length
    out["sentence-transformers fp32"] = StRow(folder, device, False, max_length)
    if bf16:
        out["sentence-transformers bf16"] = StRow(folder, device, True, max_length)
    return out


def throughput(model, sentences: list[str], repeats: int, device: str) -> tuple[float, torch.Tensor]:
    """(median sentences/s at batch 64, the embeddings)."""
    emb = model.encode(sentences, batch_size=64, show_progress=False)  # warm-up
    times = []
    for _ in range(repeats):
        start = sync(device)
        emb = model.encode(sentences, batch_size=64, show_progress=False)
        times.append(sync(device) - start)
    return len(sentences) / median(times), emb


def latency(model, sentences: list[str], device: str) -> tuple[float, float]:
    """(p50, p95) ms per single-sentence call."""
    for s in sentences[:5]:
        model.encode([s], batch_size=1, show_progress=False)
    ms = []
    for s in sentences:
        start = sync(device)
        model.encode([s], batch_size=1, show_progress=False)
        ms.append((sync(device) - start) * 1000)
    return float(np.percentile(ms, 50)), float(np.percentile(ms, 95))


def stsb_spearman(emb: torch.Tensor, short: list[str], test: pd.DataFrame) -> float:
    from scipy.stats import spearmanr

    idx = {s: i for i, s in enumerate(short)}
    u, v = emb[[idx[s] for s in test.sentence1]], emb[[idx[s] for s in test.sentence2]]
    return float(spearmanr(torch.nn.functional.cosine_similarity(u, v).numpy(), test.score).statistic * 100)


def served(model_uri: str, n: int) -> dict:
    """p50 / p95 ms of ``stsreg serve``'s app answering one pair per request: torch fp32 vs auto."""
    from starlette.testclient import TestClient

    from stsreg.infra import tracking
    from stsreg.product.serving.model_uri import resolve
    from stsreg.product.serving.serve import build_app
    from stsreg.product.serving.server_config import Compute, ServerConfig

    uri = tracking.tracking_uri()
    source = resolve(model_uri, uri)
    pairs = [{"sentence1": f"A man is playing a guitar number {i}.", "sentence2": "Someone plays an instrument."}
             for i in range(n)]
    out = {}
    for label, backend, precision in (("torch fp32", "torch", "fp32"), ("auto", "auto", "auto")):
        app = build_app(ServerConfig(artifact_uri=source, tracking_uri=uri,
                                     compute=Compute(precision=precision, backend=backend)))
        client = TestClient(app)
        for p in pairs[:5]:
            client.post("/invocations", json={"dataframe_records": [p]})
        ms = []
        for p in pairs:
            start = time.perf_counter()
            assert client.post("/invocations", json={"dataframe_records": [p]}).status_code == 200
            ms.append((time.perf_counter() - start) * 1000)
        out[label] = {"backend": json.loads(app.metadata)["backend"], "p50_ms": float(np.percentile(ms, 50)),
                      "p95_ms": float(np.percentile(ms, 95))}
    return out


def champion_folder(model_uri: str, dst: Path) -> Path:
    """The registered model's folder (weights, exports, backends.json)."""
    from stsreg.infra import tracking
    from stsreg.product import registry
    from stsreg.product.serving.model_uri import resolve

    uri = tracking.tracking_uri()
    run_id = resolve(model_uri, uri).split("/")[1]
    return registry.model_folder(tracking.client(uri).get_run(run_id).info, uri, dst)


def run(folder: Path, sts_path: Path, device: str, threads: int, repeats: int, latency_n: int) -> dict:
    from stsreg.product.serving import export

    torch.set_num_threads(threads)
    models = rows(folder, device, threads)
    sets, test = texts(sts_path, models["torch fp32"].tokenizer, models["torch fp32"].config.max_length)
    quality = export.read_quality(folder)
    avg7 = {"torch fp32": "torch", "onnx fp32": "onnx", "onnx int8": "onnx-int8"}
    results = {}
    for name, model in models.items():
        row = {"avg7": quality.get(avg7.get(name, ""), {}).get("avg7")}
        for which in SETS:
            rate, emb = throughput(model, sets[which], repeats, device)
            p50, p95 = latency(model, sets[which][:latency_n], device)
            row[which] = {"sentences_per_s": rate, "p50_ms": p50, "p95_ms": p95}
            if which == "short":
                row["stsb_test_spearman"] = stsb_spearman(emb, sets["short"], test)
        results[name] = row
        print(f"{name}: {json.dumps(row)}", flush=True)
    skipped = {} if "torch bf16" in models else {"torch bf16": NO_BF16, "sentence-transformers bf16": NO_BF16}
    return {"rows": results, "sets": {k: len(v) for k, v in sets.items()}, "threads": threads, "skipped": skipped}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="models:/sts-regression@champion", help="registered model URI or a model folder")
    ap.add_argument("--sts", default="data/prepared/sts.parquet", help="the prepared STS table (STS-B test texts)")
    ap.add_argument("--device", default="cpu", help="cpu | cuda (torch rows)")
    ap.add_argument("--threads", type=int, default=os.cpu_count(), help="threads for every row")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--latency-n", type=int, default=200, help="single-sentence calls per row and set")
    ap.add_argument("--served-n", type=int, default=200, help="requests per served setting (0: skip)")
    ap.add_argument("--out", default=None, help="report stem (default reports/benchmarks-inference[-cuda])")
    a = ap.parse_args(argv)
    if a.device == "cpu":
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(a.model) if Path(a.model).is_dir() else champion_folder(a.model, Path(tmp))
        result = run(folder, Path(a.sts), a.device, a.threads, a.repeats, a.latency_n)
        result.update(machine=machine(a.device), repeats=a.repeats, model=a.model)
        if a.served_n and a.device == "cpu" and a.model.startswith("models:/"):
            result.update(served=served(a.model, a.served_n), served_n=a.served_n)
    stem = Path(a.out or ("reports/benchmarks-inference" + ("-cuda" if a.device != "cpu" else "")))
    command = "python -m benchmarks.inference " + " ".join(argv if argv is not None else os.sys.argv[1:])
    stem.parent.mkdir(parents=True, exist_ok=True)
    stem.with_suffix(".json").write_text(json.dumps(result, indent=2))
    stem.with_suffix(".md").write_text(format_report(result, command.strip()))
    print(stem.with_suffix(".md").read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Benchmark suite (``make bench``): stsreg against sentence-transformers and against itself, side by side in one run.

Same machine, same model weights (the configured backbone), same data, same torch threads; each benchmark repeats
``--repeats`` times, alternating the two sides, and reports medians and their ratio:

- (a) ``encode``: sentences/s of :meth:`SiameseRegressor.encode` (at ``model.precision``, and in fp32) vs
  ``SentenceTransformer.encode`` on the STS-B test sentences (evaluation length and batch), plus every side's
  Spearman (equal accuracy is part of the claim);
- (b) ``train`` / ``train_grouped``: steady-state stage-2 pairs/s (random batches / ``stage2.group_by_length``) of
:func:`stsreg.product.training.stage2_training.fine_tune` (the stage-2 loss, at ``model.precision``) vs
  ``SentenceTransformerTrainer`` with ``CoSENTLoss``, same pairs, batch size and max length; timed from each side's
  per-step callback after the warm-up steps, so data loading, evaluation and saving are outside both;
- (c) ``stage1``: stage-1 wall time with a cold embedding cache vs one encoder pass over the same NLI sentences
  (stage 1 without its optional encoder step, in (d) too);
- (d) ``orchestration``: ``stsreg train --stage 1`` work through its Prefect flow + MLflow run vs the same function
  called bare, each in a fresh process (warm embedding cache, existing MLflow store);
- (e) ``dvc_noop``: ``dvc repro promote`` when nothing is stale;
- (f) ``champion``: ``make run``'s compute (fetch to promote, in a scratch clone) vs the sentence-transformers script
  it replaces (``benchmarks/st_cosent.py``), each with its 7-task scores (:mod:`benchmarks.champion`; ~35 min on 2
  cores).

Writes ``reports/benchmarks.json`` (every sample) and ``reports/benchmarks.md`` (medians, ratios, targets).
``--device cuda`` runs (a)-(c) on the GPU, both sides on the same device, into ``reports/benchmarks-cuda.*``; (d) and
(e) are host-side costs and stay in the CPU report. ``--device cpu`` (the default) hides any GPU from the run.

    python -m benchmarks.bench --repeats 3         # or: make bench
    python -m benchmarks.bench --device cuda       # on a GPU machine: the GPU columns
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from benchmarks.bench_report import TARGETS, format_report, machine, median, same_machine, sync
from benchmarks.train_speed import resolved_precision, bench_train

#: benchmarks that mean the same on a GPU; the others measure host-side costs (Prefect, MLflow, DVC)
DEVICE_BENCHMARKS = ("encode", "train", "train_grouped", "stage1")

# -- (a) encode ------------------------------------------------------------------------------------------
def bench_encode(backbone: str, sts: pd.DataFrame, max_length: int, batch_size: int, repeats: int,
                 precision: str = "auto", device: str = "cpu") -> dict:
    from sentence_transformers import SentenceTransformer

    from stsreg.product.data.catalogue import stsb_split
    from stsreg.product.sts_eval import spearman
    from stsreg.product.model import SiameseRegressor, resolve_backbone

    test = stsb_split(sts, "test")
    sentences = list(test.sentence1) + list(test.sentence2)
    ours = SiameseRegressor.from_pretrained(backbone, max_length=max_length, precision=precision).to(device)
    fp32 = SiameseRegressor.from_pretrained(backbone, max_length=max_length, precision="fp32").to(device)
    st = SentenceTransformer(resolve_backbone(backbone), device=device)
    st.max_seq_length = max_length
    # first side: what the pipeline uses; last side: the reference the ratio divides by
    rates = {"stsreg": [], "stsreg_fp32": [], "sentence_transformers": []}
    emb = {}
    for m in (ours, fp32):
        m.encode(sentences[:128], batch_size=batch_size, show_progress=False)  # warm-up (allocator, kernels, probe)
    st.encode(sentences[:128], batch_size=batch_size)
    for _ in range(repeats):
        for side, m in (("stsreg", ours), ("stsreg_fp32", fp32)):
            t0 = sync(device)
            emb[side] = m.encode(sentences, batch_size=batch_size, show_progress=False).cpu().numpy()
            rates[side].append(len(sentences) / (sync(device) - t0))
        t0 = sync(device)
        emb["sentence_transformers"] = st.encode(sentences, batch_size=batch_size, convert_to_numpy=True)
        rates["sentence_transformers"].append(len(sentences) / (sync(device) - t0))
    n = len(test)
    acc = {}
    for side, e in emb.items():
        u, v = e[:n], e[n:]
        cos = (u * v).sum(1) / ((u * u).sum(1) ** 0.5 * (v * v).sum(1) ** 0.5)
        acc[side] = spearman(cos, test.score.to_numpy())
    return {"unit": "sentences/s", "samples": rates, "stsb_test_spearman": acc, "sentences": len(sentences),
            "max_length": max_length, "batch_size": batch_size, "precision": resolved_precision(ours), "device": device,
            "ratio": median(rates["stsreg"]) / median(rates["sentence_transformers"])}


# -- (c) stage 1 vs one encoder pass --------------------------------------------------------------------
def bench_stage1(params, nli_path: Path, n_pairs: int, repeats: int, device: str = "cpu") -> dict:
    """Stage 1 picks its device itself (a visible GPU when there is one): ``main`` hides GPUs for ``--device cpu``."""
    from stsreg.product.model import SiameseRegressor
    from stsreg.infra.config import with_overrides
    from stsreg.product.data.catalogue import sample_pairs
    from stsreg.product.runners.stage1_runner import run_stage1

    # the head-only stage 1 (what the <= 1.2x target is about): the optional encoder step is a training run of its
    # own (~10 min on 2 cores), not the cost of caching embeddings for the head
    params = with_overrides(params, {"stage1.max_pairs": n_pairs, "stage1.encoder.objective": "none"})
    nli = sample_pairs(pd.read_parquet(nli_path), n_pairs, params.seed)
    unique = list(dict.fromkeys(list(nli.premise) + list(nli.hypothesis)))
    m = params.model
    times = {"stage1_cold_cache": [], "encoder_pass": []}
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as d:
            t0 = time.perf_counter()
            run_stage1(params, nli_path, Path(d) / "out", Path(d) / "cache")  # loads the model, encodes, trains, saves
            times["stage1_cold_cache"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        model = SiameseRegressor.from_params(m).to(device)
        model.encode(unique, batch_size=params.stage1.encode_batch_size, show_progress=False)
        times["encoder_pass"].append(sync(device) - t0)
    return {"unit": "s", "samples": times, "pairs": len(nli), "distinct_sentences": len(unique),
            "epochs": params.stage1.epochs, "device": device, "encoder_step": "none",
            "ratio": median(times["stage1_cold_cache"]) / median(times["encoder_pass"])}


# -- (d) Prefect + MLflow overhead ------------------------------------------------------------------------
_BARE = """
import sys; from pathlib import Path
from stsreg.infra.config import load_params; from stsreg.product.runners.stage1_runner import run_stage1
run_stage1(load_params(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4]))
"""
_FLOW = """
import sys
from pipelines.product.stage1_flow import stage1_flow
stage1_flow(params_path=sys.argv[1], nli_path=sys.argv[2], out_dir=sys.argv[3], cache_dir=sys.argv[4])
"""


def bench_orchestration(params_path: Path, nli_path: Path, cache_dir: Path, repeats: int) -> dict:
    import yaml

    times = {"flow": [], "bare": []}
    with tempfile.TemporaryDirectory() as d:
        env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{d}/mlflow/mlflow.db"}
        # the head-only stage 1, as in (c): with the encoder step each run would retrain the encoder (~10 min)
        raw = yaml.safe_load(params_path.read_text())
        raw["stage1"]["encoder"]["objective"] = "none"
        head_only = Path(d) / "params.yaml"
        head_only.write_text(yaml.safe_dump(raw, sort_keys=False))

        def run(kind: str) -> float:
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-c", _FLOW if kind == "flow" else _BARE, str(head_only), str(nli_path),
                            f"{d}/out-{kind}", str(cache_dir)], check=True, env=env, capture_output=True)
            return time.perf_counter() - t0

        run("flow")  # warm-up: fills the embedding cache and creates the MLflow store, as a project that ran once has
        for _ in range(repeats):
            for kind in ("flow", "bare"):
                times[kind].append(run(kind))
    return {"unit": "s", "samples": times, "what": "head-only stage 1 (full NLI, warm embedding cache) in a fresh "
                                                   "process",
            "ratio": median(times["flow"]) / median(times["bare"])}


# -- (e) no-op dvc repro ----------------------------------------------------------------------------------
def bench_dvc_noop(repeats: int, target: str = "promote") -> dict:
    status = subprocess.run(["dvc", "status", target, "--with-deps", "--quiet"], capture_output=True, text=True)
    if status.returncode != 0:
        return {"unit": "s", "skipped": f"`dvc status {target}` reports stale stages: run `make run` first, then bench"}
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        run = subprocess.run(["dvc", "repro", target], capture_output=True, text=True)
        times.append(time.perf_counter() - t0)
        if run.returncode != 0:  # e.g. another `dvc repro` holds a lock on a dep: no no-op to time
            first = next((line for line in run.stderr.splitlines() if line.startswith("ERROR")),
                         run.stderr.strip()[:200])
            return {"unit": "s", "skipped": f"`dvc repro {target}` failed: {first}"}
        out = run.stdout
        if "Running stage" in out:
            raise RuntimeError(f"`dvc repro {target}` ran a stage during the no-op benchmark:\n{out}")
    return {"unit": "s", "samples": {"dvc_repro": times}, "ratio": median(times)}


def _champion(params, params_path: Path) -> dict:
    from benchmarks.champion import bench_champion
    from stsreg.infra.config import resolve_mirror

    with tempfile.TemporaryDirectory() as d:
        return bench_champion(str(resolve_mirror(params.fetch, None, base=params_path.resolve().parent)), Path(d))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--sts", default="data/prepared/sts.parquet")
    ap.add_argument("--nli", default="data/prepared/nli_train.parquet")
    ap.add_argument("--cache", default="cache/embeddings", help="stage-1 embedding cache used by (d)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--train-pairs", type=int, default=480, help="(b) pairs per training run")
    ap.add_argument("--stage1-pairs", type=int, default=5000, help="(c) NLI pairs per stage-1 run")
    ap.add_argument("--only", nargs="*", choices=list(TARGETS),
                    help="run only these benchmarks (an existing report keeps its other rows when measured on the "
                         "same machine)")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                    help=f"where both sides run; cuda runs {', '.join(DEVICE_BENCHMARKS)} (default: cpu, GPUs hidden)")
    ap.add_argument("--out", help="report path without suffix (default reports/benchmarks, or reports/benchmarks-cuda)")
    a = ap.parse_args(argv)
    # before torch initialises CUDA: stage 1 and sentence-transformers would pick a GPU themselves
    if a.device == "cpu":
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
    from stsreg.infra.config import load_params

    params = load_params(a.params)
    sts = pd.read_parquet(a.sts)
    names = DEVICE_BENCHMARKS if a.device == "cuda" else list(TARGETS)
    todo = [n for n in a.only or names if n in names]
    m = params.model
    results = {"machine": machine(a.device), "repeats": a.repeats, "precision": m.precision, "benchmarks": {}}
    runners = {
        "encode": lambda: bench_encode(m.backbone, sts, params.evaluate.max_length, params.evaluate.batch_size,
                                       a.repeats, m.precision, a.device),
        "train": lambda: bench_train(m.backbone, sts, a.train_pairs, params.stage2, m.max_length, a.repeats,
                                     precision=m.precision, device=a.device),
        "train_grouped": lambda: bench_train(m.backbone, sts, a.train_pairs, params.stage2, m.max_length, a.repeats,
                                             group_by_length=True, precision=m.precision, device=a.device),
        "stage1": lambda: bench_stage1(params, Path(a.nli), a.stage1_pairs, a.repeats, a.device),
        "orchestration": lambda: bench_orchestration(Path(a.params), Path(a.nli), Path(a.cache), a.repeats),
        "dvc_noop": lambda: bench_dvc_noop(a.repeats),
        "champion": lambda: _champion(params, Path(a.params)),
    }
    out = Path(a.out or ("reports/benchmarks" if a.device == "cpu" else "reports/benchmarks-cuda"))
    out.parent.mkdir(parents=True, exist_ok=True)
    previous = out.with_suffix(".json")
    if a.only and previous.exists():  # a partial run keeps the other rows when they come from the same machine
        old = json.loads(previous.read_text())
        if same_machine(old.get("machine", {}), results["machine"]):
            results["benchmarks"] = {k: {**v, "date": v.get("date", old["machine"].get("date"))}
                                     for k, v in old["benchmarks"].items() if k not in todo}
    for name in todo:
        print(f"bench: {name} ...", flush=True)
        t0 = time.perf_counter()
        results["benchmarks"][name] = {**runners[name](), "date": time.strftime("%Y-%m-%d %H:%M")}
        r = results["benchmarks"][name]
        print(f"bench: {name} ratio {r.get('ratio', float('nan')):.3f} ({time.perf_counter() - t0:.0f} s)", flush=True)
        out.with_suffix(".json").write_text(json.dumps(results, indent=2))  # partial results survive a crash
    report = format_report(results, str(out.with_suffix(".json")))
    out.with_suffix(".md").write_text(report + "\n")
    print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())

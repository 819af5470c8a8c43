"""Benchmark suite (``make bench``): stsreg against sentence-transformers and against itself, side by side in one run.

Same machine, same model weights (the configured backbone), same data, same torch threads; each benchmark repeats
``--repeats`` times, alternating the two sides, and reports medians and their ratio:

- (a) ``encode``: sentences/s of :meth:`SiameseRegressor.encode` (at ``model.precision``, and in fp32) vs
  ``SentenceTransformer.encode`` on the STS-B test sentences (evaluation length and batch), plus every side's
  Spearman (equal accuracy is part of the claim);
- (b) ``train`` / ``train_grouped``: steady-state stage-2 pairs/s (random batches / ``stage2.group_by_length``) of :func:`stsreg.training.stage2.fine_tune` (the stage-2 loss, at ``model.precision``) vs
  ``SentenceTransformerTrainer`` with ``CoSENTLoss``, same pairs, batch size and max length; timed from each side's
  per-step callback after the warm-up steps, so data loading, evaluation and saving are outside both;
- (c) ``stage1``: stage-1 wall time with a cold embedding cache vs one encoder pass over the same NLI sentences;
- (d) ``orchestration``: ``stsreg train --stage 1`` work through its Prefect flow + MLflow run vs the same function
  called bare, each in a fresh process (warm embedding cache, existing MLflow store);
- (e) ``dvc_noop``: ``dvc repro promote`` when nothing is stale.

Writes ``reports/benchmarks.json`` (every sample) and ``reports/benchmarks.md`` (medians, ratios, targets).

    python -m benchmarks.bench --repeats 3         # or: make bench
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

#: name -> (direction, target, what the ratio means)
TARGETS = {
    "encode": (">=", 3.0, "stsreg / sentence-transformers sentences/s"),
    "train": (">=", 1.3, "stsreg with random batches / sentence-transformers pairs/s"),
    "train_grouped": (">=", 2.0, "stsreg with stage2.group_by_length / sentence-transformers pairs/s"),
    "stage1": ("<=", 1.2, "stage-1 wall time / one encoder pass"),
    "orchestration": ("<", 1.10, "flow + MLflow wall time / bare function"),
    "dvc_noop": ("<", 5.0, "seconds (not a ratio)"),
}


def _median(xs):
    return float(statistics.median(xs))


def _met(name: str, value: float) -> bool:
    op, target, _ = TARGETS[name]
    return {">=": value >= target, "<=": value <= target, "<": value < target}[op]


# -- (a) encode ------------------------------------------------------------------------------------------
def bench_encode(backbone: str, sts: pd.DataFrame, max_length: int, batch_size: int, repeats: int,
                 precision: str = "auto") -> dict:
    from sentence_transformers import SentenceTransformer

    from stsreg.evaluate import spearman
    from stsreg.model import SiameseRegressor, resolve_backbone

    test = sts[(sts.dataset == "stsb") & (sts.split == "test")]
    sentences = list(test.sentence1) + list(test.sentence2)
    ours = SiameseRegressor.from_pretrained(backbone, max_length=max_length, precision=precision)
    fp32 = SiameseRegressor.from_pretrained(backbone, max_length=max_length, precision="fp32")
    st = SentenceTransformer(resolve_backbone(backbone), device="cpu")
    st.max_seq_length = max_length
    # first side: what the pipeline uses; last side: the reference the ratio divides by
    rates = {"stsreg": [], "stsreg_fp32": [], "sentence_transformers": []}
    emb = {}
    for m in (ours, fp32):
        m.encode(sentences[:128], batch_size=batch_size, show_progress=False)  # warm-up (allocator, kernels, probe)
    st.encode(sentences[:128], batch_size=batch_size)
    for _ in range(repeats):
        for side, m in (("stsreg", ours), ("stsreg_fp32", fp32)):
            t0 = time.perf_counter()
            emb[side] = m.encode(sentences, batch_size=batch_size, show_progress=False).numpy()
            rates[side].append(len(sentences) / (time.perf_counter() - t0))
        t0 = time.perf_counter()
        emb["sentence_transformers"] = st.encode(sentences, batch_size=batch_size, convert_to_numpy=True)
        rates["sentence_transformers"].append(len(sentences) / (time.perf_counter() - t0))
    n = len(test)
    acc = {}
    for side, e in emb.items():
        u, v = e[:n], e[n:]
        cos = (u * v).sum(1) / ((u * u).sum(1) ** 0.5 * (v * v).sum(1) ** 0.5)
        acc[side] = spearman(cos, test.score.to_numpy())
    return {"unit": "sentences/s", "samples": rates, "stsb_test_spearman": acc, "sentences": len(sentences),
            "max_length": max_length, "batch_size": batch_size, "precision": _resolved(ours),
            "ratio": _median(rates["stsreg"]) / _median(rates["sentence_transformers"])}


# -- (b) train -------------------------------------------------------------------------------------------
def _train_pairs(sts: pd.DataFrame, n: int, seed: int) -> pd.DataFrame:
    train = sts[sts.dataset.isin(["stsb", "sickr"]) & (sts.split == "train")]
    return train.sample(n=min(n, len(train)), random_state=seed).reset_index(drop=True)


def _steady_rate(stamps: list[float], batch_size: int, warmup: int) -> float:
    """Pairs/s between the end of step ``warmup`` and the last step (per-step callback timestamps)."""
    if len(stamps) <= warmup + 1:
        raise ValueError(f"need more than {warmup + 1} steps to time, got {len(stamps)}")
    return (len(stamps) - 1 - warmup) * batch_size / (stamps[-1] - stamps[warmup])


def _resolved(model) -> str:
    from stsreg import precision

    return precision.describe(model.amp_dtype)


def _train_stsreg(backbone: str, pairs: pd.DataFrame, dev: pd.DataFrame, stage2, max_length: int, work: Path,
                  warmup: int, group_by_length: bool, precision: str) -> float:
    from stsreg.model import SiameseRegressor
    from stsreg.losses import Objective
    from stsreg.training.stage2 import fine_tune

    stamps: list[float] = []
    model = SiameseRegressor.from_pretrained(backbone, max_length=max_length, precision=precision)
    p = dataclasses.replace(stage2, epochs=1, eval_every=10**9, checkpoint_every=10**9, group_by_length=group_by_length)
    fine_tune(model, pairs, dev, Objective.from_params(p), p, 0, work / "out", work / "ckpt", log_metric=lambda k, v, s: k == "train_loss" and stamps.append(time.perf_counter()))
    return _steady_rate(stamps, p.batch_size, warmup)


def _train_st(backbone: str, pairs: pd.DataFrame, batch_size: int, max_length: int, work: Path, warmup: int) -> float:
    from datasets import Dataset
    from sentence_transformers import SentenceTransformer, SentenceTransformerTrainer, SentenceTransformerTrainingArguments
    from sentence_transformers.losses import CoSENTLoss
    from transformers import TrainerCallback

    from stsreg.model import resolve_backbone

    stamps: list[float] = []

    class Stamp(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            stamps.append(time.perf_counter())

    model = SentenceTransformer(resolve_backbone(backbone), device="cpu")
    model.max_seq_length = max_length
    # scale labels to 0-1 per dataset, as sentence-transformers users do (SICK-R is 1-5)
    data = Dataset.from_dict({"sentence1": list(pairs.sentence1), "sentence2": list(pairs.sentence2),
                              "score": list((pairs.score / 5.0).astype(float))})
    args = SentenceTransformerTrainingArguments(
        output_dir=str(work / "st"), per_device_train_batch_size=batch_size, num_train_epochs=1, learning_rate=2e-5,
        warmup_ratio=0.1, save_strategy="no", logging_strategy="no", report_to="none", disable_tqdm=True, use_cpu=True,
        dataloader_num_workers=0, seed=0)
    trainer = SentenceTransformerTrainer(model=model, args=args, train_dataset=data, loss=CoSENTLoss(model),
                                         callbacks=[Stamp()])
    trainer.train()
    return _steady_rate(stamps, batch_size, warmup)


def bench_train(backbone: str, sts: pd.DataFrame, n_pairs: int, stage2, max_length: int, repeats: int,
                group_by_length: bool = False, precision: str = "auto", warmup: int = 5) -> dict:
    """``stage2``: :class:`stsreg.config.Stage2Params` (its loss and batch size; one epoch, no dev evaluation)."""
    batch_size = stage2.batch_size
    pairs = _train_pairs(sts, n_pairs, 0)
    dev = sts[(sts.dataset == "stsb") & (sts.split == "dev")].head(16).reset_index(drop=True)
    rates = {"stsreg": [], "sentence_transformers": []}
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as d:
            rates["stsreg"].append(_train_stsreg(backbone, pairs, dev, stage2, max_length, Path(d), warmup, group_by_length,
                                                 precision))
        with tempfile.TemporaryDirectory() as d:
            rates["sentence_transformers"].append(_train_st(backbone, pairs, batch_size, max_length, Path(d), warmup))
    return {"unit": "pairs/s", "samples": rates, "pairs": len(pairs), "batch_size": batch_size, "max_length": max_length,
            "group_by_length": group_by_length, "precision": precision, "loss": stage2.loss,
            "timed_steps": len(pairs) // batch_size - 1 - warmup,
            "ratio": _median(rates["stsreg"]) / _median(rates["sentence_transformers"])}


# -- (c) stage 1 vs one encoder pass --------------------------------------------------------------------
def bench_stage1(params, nli_path: Path, n_pairs: int, repeats: int) -> dict:
    from stsreg.model import SiameseRegressor
    from stsreg.data.catalogue import sample_pairs
    from stsreg.runners import run_stage1

    params = dataclasses.replace(params, stage1=dataclasses.replace(params.stage1, max_pairs=n_pairs))
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
        model = SiameseRegressor.from_params(m)
        model.encode(unique, batch_size=params.stage1.encode_batch_size, show_progress=False)
        times["encoder_pass"].append(time.perf_counter() - t0)
    return {"unit": "s", "samples": times, "pairs": len(nli), "distinct_sentences": len(unique),
            "epochs": params.stage1.epochs,
            "ratio": _median(times["stage1_cold_cache"]) / _median(times["encoder_pass"])}


# -- (d) Prefect + MLflow overhead ------------------------------------------------------------------------
_BARE = """
import sys; from pathlib import Path
from stsreg.config import load_params; from stsreg.runners import run_stage1
run_stage1(load_params(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4]))
"""
_FLOW = """
import sys
from pipelines.train_flow import stage1_flow
stage1_flow(params_path=sys.argv[1], nli_path=sys.argv[2], out_dir=sys.argv[3], cache_dir=sys.argv[4])
"""


def bench_orchestration(params_path: Path, nli_path: Path, cache_dir: Path, repeats: int) -> dict:
    times = {"flow": [], "bare": []}
    with tempfile.TemporaryDirectory() as d:
        env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{d}/mlflow/mlflow.db"}

        def run(kind: str) -> float:
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-c", _FLOW if kind == "flow" else _BARE, str(params_path), str(nli_path),
                            f"{d}/out-{kind}", str(cache_dir)], check=True, env=env, capture_output=True)
            return time.perf_counter() - t0

        run("flow")  # warm-up: fills the embedding cache and creates the MLflow store, as a project that ran once has
        for _ in range(repeats):
            for kind in ("flow", "bare"):
                times[kind].append(run(kind))
    return {"unit": "s", "samples": times, "what": "stage 1 (full NLI, warm embedding cache) in a fresh process",
            "ratio": _median(times["flow"]) / _median(times["bare"])}


# -- (e) no-op dvc repro ----------------------------------------------------------------------------------
def bench_dvc_noop(repeats: int, target: str = "promote") -> dict:
    status = subprocess.run(["dvc", "status", target, "--with-deps", "--quiet"], capture_output=True, text=True)
    if status.returncode != 0:
        return {"unit": "s", "skipped": f"`dvc status {target}` reports stale stages: run `make run` first, then bench"}
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = subprocess.run(["dvc", "repro", target], capture_output=True, text=True, check=True).stdout
        times.append(time.perf_counter() - t0)
        if "Running stage" in out:
            raise RuntimeError(f"`dvc repro {target}` ran a stage during the no-op benchmark:\n{out}")
    return {"unit": "s", "samples": {"dvc_repro": times}, "ratio": _median(times)}


# -- report -----------------------------------------------------------------------------------------------
def machine() -> dict:
    import torch

    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), platform.machine()) \
        if Path("/proc/cpuinfo").exists() else platform.machine()
    from stsreg.precision import cpu_flags, native_bf16

    flags = sorted(cpu_flags() & {"avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile", "avx512_vnni"})
    return {"cpu": cpu, "cpu_flags": flags, "native_bf16": native_bf16(torch.device("cpu")),
            "torch_threads": torch.get_num_threads(), "cores": os.cpu_count(), "torch": torch.__version__,
            "python": platform.python_version(), "date": time.strftime("%Y-%m-%d %H:%M")}


def format_report(results: dict) -> str:
    m = results["machine"]
    lines = ["# Benchmarks", "",
             f"`make bench` on {m['cpu']} ({m['cores']} cores, torch {m['torch']} with {m['torch_threads']} threads), "
             f"{m['date']}; medians of {results['repeats']} runs, the sides alternated in one process or one shell. "
             f"CPU flags: {', '.join(m.get('cpu_flags', [])) or 'n/a'}; native bf16: {m.get('native_bf16')}; "
             f"stsreg precision: {results.get('precision', 'fp32')}.", "",
             "| benchmark | stsreg | reference | ratio | target | met | measured |", "|---|---:|---:|---:|---:|---|---|"]
    for name, r in results["benchmarks"].items():
        op, target, meaning = TARGETS[name]
        if "skipped" in r:
            lines.append(f"| {name} | – | – | – | {op} {target} | skipped: {r['skipped']} | {r.get('date', m['date'])} |")
            continue
        sides = list(r["samples"])  # first: stsreg as configured; last: the reference
        ours = f"{_median(r['samples'][sides[0]]):.2f} {r['unit']}"
        ref = f"{_median(r['samples'][sides[-1]]):.2f} {r['unit']} ({sides[-1]})" if len(sides) > 1 else "–"
        met = _met(name, r["ratio"])
        gap = "" if met else f" (missed by {abs(r['ratio'] - target) / target:.1%})"
        lines.append(f"| {name}: {meaning} | {ours} | {ref} | {r['ratio']:.3f} | {op} {target} | {'yes' if met else 'no' + gap} "
                     f"| {r.get('date', m['date'])} |")
    enc = results["benchmarks"].get("encode")
    if enc and "stsb_test_spearman" in enc:
        a = enc["stsb_test_spearman"]
        fp32 = _median(enc["samples"]["stsreg_fp32"]) if "stsreg_fp32" in enc["samples"] else None
        lines += ["", f"Encode accuracy (STS-B test Spearman x100 of cosine): stsreg ({enc.get('precision', 'fp32')}) "
                      f"{a['stsreg']:.2f}, stsreg fp32 {a.get('stsreg_fp32', float('nan')):.2f}, "
                      f"sentence-transformers {a['sentence_transformers']:.2f}."]
        if fp32:
            lines.append(f"stsreg in fp32 encodes {fp32:.2f} sentences/s: "
                         f"{fp32 / _median(enc['samples']['sentence_transformers']):.3f}x sentence-transformers.")
    lines += ["", "Every sample is in `reports/benchmarks.json`."]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--sts", default="data/prepared/sts.parquet")
    ap.add_argument("--nli", default="data/prepared/nli_train.parquet")
    ap.add_argument("--cache", default="cache/embeddings", help="stage-1 embedding cache used by (d)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--train-pairs", type=int, default=480, help="(b) pairs per training run")
    ap.add_argument("--stage1-pairs", type=int, default=5000, help="(c) NLI pairs per stage-1 run")
    ap.add_argument("--only", nargs="*", choices=list(TARGETS), help="run only these benchmarks (an existing report keeps its other rows when measured on the same CPU)")
    ap.add_argument("--out", default="reports/benchmarks")
    a = ap.parse_args(argv)
    from stsreg.config import load_params

    params = load_params(a.params)
    sts = pd.read_parquet(a.sts)
    todo = a.only or list(TARGETS)
    m = params.model
    results = {"machine": machine(), "repeats": a.repeats, "precision": m.precision, "benchmarks": {}}
    runners = {
        "encode": lambda: bench_encode(params.model.backbone, sts, params.evaluate.max_length, params.evaluate.batch_size,
                                       a.repeats, m.precision),
        "train": lambda: bench_train(m.backbone, sts, a.train_pairs, params.stage2, m.max_length, a.repeats,
                                     precision=m.precision),
        "train_grouped": lambda: bench_train(m.backbone, sts, a.train_pairs, params.stage2, m.max_length, a.repeats,
                                             group_by_length=True, precision=m.precision),
        "stage1": lambda: bench_stage1(params, Path(a.nli), a.stage1_pairs, a.repeats),
        "orchestration": lambda: bench_orchestration(Path(a.params), Path(a.nli), Path(a.cache), a.repeats),
        "dvc_noop": lambda: bench_dvc_noop(a.repeats),
    }
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    previous = out.with_suffix(".json")
    if a.only and previous.exists():  # a partial run keeps the other rows when they come from the same CPU
        old = json.loads(previous.read_text())
        if old.get("machine", {}).get("cpu") == results["machine"]["cpu"]:
            results["benchmarks"] = {k: {**v, "date": v.get("date", old["machine"].get("date"))}
                                     for k, v in old["benchmarks"].items() if k not in todo}
    for name in todo:
        print(f"bench: {name} ...", flush=True)
        t0 = time.perf_counter()
        results["benchmarks"][name] = {**runners[name](), "date": time.strftime("%Y-%m-%d %H:%M")}
        r = results["benchmarks"][name]
        print(f"bench: {name} ratio {r.get('ratio', float('nan')):.3f} ({time.perf_counter() - t0:.0f} s)", flush=True)
        out.with_suffix(".json").write_text(json.dumps(results, indent=2))  # partial results survive a crash
    out.with_suffix(".md").write_text(format_report(results) + "\n")
    print(format_report(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What each row of the comparison costs on this machine: wall time per phase (stage 1, stage 2, evaluation) and peak
memory, on one backbone, with the settings ``stsreg compare --backbone NAME`` uses (``backbone_compare.SETTINGS``).

    python -m benchmarks.compare_cost --backbone all-mpnet-base-v2 --out reports/compare_cost-cuda
    python -m benchmarks.compare_cost --backbone all-mpnet-base-v2 --random-weights-from DIR --precision bf16 ...

Time and memory do not depend on the weights' values, so ``--random-weights-from DIR`` (a folder with the backbone's
``config.json`` and tokenizer files, no weights) builds the same architecture with random weights: the cost of a
backbone whose weights cannot be sent to the machine that is measured. Scores of such rows mean nothing and are not
reported. Rows are trained and evaluated by the comparison's own code (:func:`stsreg.experiments.compare.train_method`,
:func:`stsreg.product.runners.eval_runner.run_evaluate`) in a scratch folder; nothing under ``reports/compare*`` is
touched. The report is rewritten after every row, and ``--deadline-s`` stops starting rows once that much time has
passed, so a run on a machine lent for minutes still reports what it finished.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROWS = ("base", "contrast", "cosent", "cosine_mse", "ours", "ours_cos")


def random_backbone(src: Path, dst: Path) -> Path:
    """``src``'s architecture (config.json) with random weights (seed 0), its tokenizer and other small files copied."""
    import torch
    from transformers import AutoConfig, AutoModel

    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("*.safetensors", "*.bin", "*.h5", "*.onnx"))
    torch.manual_seed(0)
    AutoModel.from_config(AutoConfig.from_pretrained(src)).save_pretrained(dst)
    return dst


def peak_reset(device: str) -> None:
    if device == "cuda":
        import torch
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()


def peak_gb(device: str) -> float:
    """Peak GPU memory allocated since the last reset (cuda), else the process's peak RSS so far (never reset)."""
    if device == "cuda":
        import torch
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated() / 1e9
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6


def stage1_seconds(runs: Path, seen: set[str], started: float) -> float | None:
    """Stage 1's share of a row: a stage-1 folder that appeared during the row finished when its summary was written."""
    new = [d for d in runs.glob("_stage1-*") if d.name not in seen and (d / "training_summary.json").exists()]
    return (new[0].joinpath("training_summary.json").stat().st_mtime - started) if new else None


def run_row(params, method: str, seed: int, data: dict, runs: Path, cache: Path, device: str) -> dict:
    """Train and evaluate one row; returns its phases' seconds and peak memory (GB)."""
    from stsreg.experiments import compare
    from stsreg.product.runners import NOOP
    from stsreg.product.runners.eval_runner import run_evaluate

    work = runs / f"{method}-{seed}"
    work.mkdir(parents=True)
    seen = {d.name for d in runs.glob("_stage1-*")}
    peak_reset(device)
    t0 = time.time()
    model_dir = compare.train_method(dataclasses.replace(params, seed=seed), method, data["sts"], data["nli"], work,
                                     NOOP, cache_dir=cache)
    t1 = time.time()
    train_peak = peak_gb(device)
    peak_reset(device)
    metrics = run_evaluate(params, model_dir, data["sts"], work)
    t2 = time.time()
    shutil.rmtree(work / "model", ignore_errors=True)  # as the comparison does: ~440 MB per mpnet row, not needed
    s1 = stage1_seconds(runs, seen, t0)
    summary = (
        json.loads((work / "training_summary.json").read_text()) if (work / "training_summary.json").exists() else {}
    )
    return {"row": method, "seed": seed, "stage1_s": s1, "stage2_s": (t1 - t0) - (s1 or 0.0) if compare.METHODS[method]
            else None,
            "eval_s": t2 - t1, "total_s": t2 - t0, "train_peak_gb": train_peak if compare.METHODS[method] else None,
            "eval_peak_gb": peak_gb(device), "precision": metrics.get("precision"), "steps": summary.get("steps")}


def machine(device: str) -> str:
    """The GPU (cuda), the CPU as every speed figure names it (:func:`stsreg.infra.tracking.cpu_name`), threads,
    torch."""
    import torch
    from stsreg.infra.tracking import cpu_name

    gpu = f"{torch.cuda.get_device_name(0)}, " if device == "cuda" else ""
    return f"{gpu}{cpu_name()}, {torch.get_num_threads()} threads, torch {torch.__version__}"


def fmt(value, spec: str = ".0f") -> str:
    return "-" if value is None else format(value, spec)


def write_report(out: Path, head: dict, rows: list[dict]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps({**head, "rows": rows}, indent=1))
    mem = "peak GPU memory allocated" if head["device"] == "cuda" else "peak RSS of the process so far"
    lines = [f"# What each comparison row costs: {head['backbone']} on {head['device']}", "",
             f"`{head['command']}` on {head['machine']}, {head['date']}. Weights: {head['weights']}. Rows in order; "
             "a row that starts from stage 1 trains it when no earlier row of the seed did. Memory: " + mem + ".", "",
             "| row | seed | stage 1 s | stage 2 s | evaluation s | total s | training GB | evaluation GB | precision "
             "| steps |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---|---:|"]
    for r in rows:
        lines.append(f"| {r['row']} | {r['seed']} | {fmt(r['stage1_s'])} | {fmt(r['stage2_s'])} | {fmt(r['eval_s'])} | "
                     f"{fmt(r['total_s'])} | {fmt(r['train_peak_gb'], '.1f')} | {fmt(r['eval_peak_gb'], '.1f')} | "
                     f"{r['precision'] or '-'} | {fmt(r['steps'], 'd')} |")
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backbone", default="all-mpnet-base-v2", help="packaged name, Hugging Face name or local path")
    ap.add_argument("--rows", default=",".join(ROWS), help="comparison rows, in order (default: %(default)s)")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--random-weights-from", type=Path, help="a folder with the backbone's config and tokenizer: "
                    "time and memory of the same architecture with random weights (scores not reported)")
    ap.add_argument("--precision", help="model.precision for every row (default: the comparison's, auto)")
    ap.add_argument("--params", type=Path, default=Path("params.yaml"))
    ap.add_argument("--sts", type=Path, default=Path("data/prepared/sts.parquet"))
    ap.add_argument("--nli", type=Path, default=Path("data/prepared/nli_train.parquet"))
    ap.add_argument("--deadline-s", type=float, default=None, help="start no row after the first once this many "
                    "seconds have passed (a row already running goes on)")
    ap.add_argument("--out", type=Path, default=Path("reports/compare_cost"), help="writes OUT.md and OUT.json")
    argv = sys.argv[1:] if argv is None else argv
    args = ap.parse_args(argv)

    from stsreg.experiments import backbone_compare
    from stsreg.infra.runtime import resolve_device
    from stsreg.infra.config import load_params, with_overrides

    sets = {"model.precision": args.precision} if args.precision else {}
    params = backbone_compare.resolved(load_params(args.params), args.backbone, sets)
    device = resolve_device().type  # where training runs: the GPU when there is one
    started = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        weights = "as published"
        if args.random_weights_from:
            folder = random_backbone(args.random_weights_from, Path(tmp) / "backbone")
            params = with_overrides(params, {"model.backbone": str(folder)})
            weights = f"random (the architecture of {args.random_weights_from / 'config.json'}; scores not reported)"
        head = {
            "backbone": args.backbone,
            "device": device,
            "machine": machine(device),
            "weights": weights,
            "date": time.strftime("%Y-%m-%d %H:%M"),
            "command": "python -m benchmarks.compare_cost " + " ".join(argv),
        }
        rows: list[dict] = []
        for method in args.rows.split(","):
            if rows and args.deadline_s is not None and time.time() - started > args.deadline_s:
                print(f"deadline: {method} not started", flush=True)
                break
            rows.append(run_row(params, method, args.seed, {"sts": args.sts, "nli": args.nli}, Path(tmp) / "runs",
                                Path(tmp) / "cache", device))
            print(json.dumps(rows[-1]), flush=True)
            write_report(args.out, head, rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The ``make bench`` report: targets, the machine a run measured on, and the markdown table of medians and ratios."""

from __future__ import annotations

import os
import platform
import statistics
import time
from pathlib import Path

#: name -> (direction, target, what the ratio means)
TARGETS = {
    "encode": (">=", 3.0, "stsreg / sentence-transformers sentences/s"),
    "train": (">=", 1.3, "stsreg with random batches / sentence-transformers pairs/s"),
    "train_grouped": (">=", 2.0, "stsreg with stage2.group_by_length / sentence-transformers pairs/s"),
    "stage1": ("<=", 1.2, "stage-1 wall time / one encoder pass"),
    "orchestration": ("<", 1.10, "flow + MLflow wall time / bare function"),
    "dvc_noop": ("<", 5.0, "seconds (not a ratio)"),
    "champion": ("<=", 1.0, "make run compute / the sentence-transformers script (time to a champion)"),
}


def median(xs):
    return float(statistics.median(xs))


def _met(name: str, value: float) -> bool:
    op, target, _ = TARGETS[name]
    return {">=": value >= target, "<=": value <= target, "<": value < target}[op]


def sync(device: str) -> float:
    """``time.perf_counter()`` once the device's queued work is done (CUDA runs asynchronously; the CPU needs no
    wait)."""
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()
    return time.perf_counter()


def same_machine(a: dict, b: dict) -> bool:
    """Whether two reports' rows may share a table: same CPU model, flags and GPU (a model name alone is ambiguous:
    two AMD EPYC machines here differ in ``avx512_bf16``)."""
    keys = ("cpu", "cpu_flags", "gpu")
    return all(a.get(k) == b.get(k) for k in keys)


def machine(device: str = "cpu") -> dict:
    """The CPU model, its bf16-relevant flags, threads and versions, and the GPU when ``device`` is CUDA: recorded
    with every speed figure."""
    import torch

    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
               platform.machine()) \
        if Path("/proc/cpuinfo").exists() else platform.machine()
    from stsreg.infra.runtime import cpu_flags
    from stsreg.product.precision import native_bf16

    flags = sorted(cpu_flags() & {"avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile", "avx512_vnni"})
    gpu = {"gpu": torch.cuda.get_device_name(0), "gpu_native_bf16": native_bf16(torch.device("cuda", 0))} \
        if device.startswith("cuda") else {}
    return {"cpu": cpu, "cpu_flags": flags, "native_bf16": native_bf16(torch.device("cpu")), **gpu,
            "torch_threads": torch.get_num_threads(), "cores": os.cpu_count(), "torch": torch.__version__,
            "python": platform.python_version(), "date": time.strftime("%Y-%m-%d %H:%M")}


def format_report(results: dict, samples: str = "reports/benchmarks.json") -> str:
    """``reports/benchmarks.md``: one row per benchmark (medians, ratio, target, met or missed by how much, date)."""
    m = results["machine"]
    on = f"{m['gpu']} (native bf16: {m.get('gpu_native_bf16')}; host {m['cpu']}, " if m.get("gpu") else f"{m['cpu']} ("
    lines = ["# Benchmarks" + (" on a GPU" if m.get("gpu") else ""), "",
             f"`make bench` on {on}{m['cores']} cores, torch {m['torch']} with {m['torch_threads']} threads), "
             f"{m['date']}; medians of {results['repeats']} runs, the sides alternated in one process or one shell. "
             f"CPU flags: {', '.join(m.get('cpu_flags', [])) or 'n/a'}; native bf16: {m.get('native_bf16')}; "
             f"stsreg precision: {results.get('precision', 'fp32')}.", "",
             "| benchmark | stsreg | reference | ratio | target | met | measured |",
             "|---|---:|---:|---:|---:|---|---|"]
    for name, r in results["benchmarks"].items():
        op, target, meaning = TARGETS[name]
        if "skipped" in r:
            lines.append(f"| {name} | – | – | – | {op} {target} | skipped: {r['skipped']} | {r.get('date', m['date'])} "
                         "|")
            continue
        sides = list(r["samples"])  # first: stsreg as configured; last: the reference
        ours = f"{median(r['samples'][sides[0]]):.2f} {r['unit']}"
        ref = f"{median(r['samples'][sides[-1]]):.2f} {r['unit']} ({sides[-1]})" if len(sides) > 1 else "–"
        met = _met(name, r["ratio"])
        gap = "" if met else f" (missed by {abs(r['ratio'] - target) / target:.1%})"
        lines.append(f"| {name}: {meaning} | {ours} | {ref} | {r['ratio']:.3f} | {op} {target} | "
                     f"{'yes' if met else 'no' + gap} | {r.get('date', m['date'])} |")
    enc = results["benchmarks"].get("encode")
    if enc and "stsb_test_spearman" in enc:
        a = enc["stsb_test_spearman"]
        fp32 = median(enc["samples"]["stsreg_fp32"]) if "stsreg_fp32" in enc["samples"] else None
        lines += ["", f"Encode accuracy (STS-B test Spearman x100 of cosine): stsreg ({enc.get('precision', 'fp32')}) "
                      f"{a['stsreg']:.2f}, stsreg fp32 {a.get('stsreg_fp32', float('nan')):.2f}, "
                      f"sentence-transformers {a['sentence_transformers']:.2f}."]
        if fp32:
            lines.append(f"stsreg in fp32 encodes {fp32:.2f} sentences/s: "
                         f"{fp32 / median(enc['samples']['sentence_transformers']):.3f}x sentence-transformers.")
    champ = results["benchmarks"].get("champion")
    if champ and "scores" in champ:
        from benchmarks.champion import format_champion

        lines += format_champion(champ)
    lines += ["", f"Every sample is in `{samples}`."]
    return "\n".join(lines)

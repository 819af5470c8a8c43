"""One profile measurement: a few real training steps of a method at (batch, length), in a fresh process.

Methods (on synthetic token ids of exactly ``length`` tokens, no padding):

- ``regression_frozen``: stage 1 — encoder frozen (forward without grad), Smooth K2 on the head;
- ``regression_full``: stage 2 — everything trained, Smooth K2 on the head, AdamW;
- ``contrastive``: supervised SimCSE — anchor, positive and a hard negative per example (3 sequences),
  in-batch softmax over 2·batch candidates, everything trained, AdamW.

Peak memory: on CUDA ``torch.cuda.max_memory_allocated``; on CPU the process's peak RSS (``ru_maxrss``) minus
its RSS once the model is loaded, i.e. what training added.

    python -m stsreg.experiments.profiling.measure one --method contrastive --batch 8 --length 32   # JSON on stdout
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

import numpy as np

from stsreg.infra.method_specs import PROFILE

#: The steps this module measures (declared in :data:`stsreg.infra.method_specs.PROFILE`).
METHODS = tuple(PROFILE)


def _rss_mb() -> float:
    """Current resident set size in MB (Linux /proc)."""
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * resource.getpagesize() / 2**20


def measure(backbone: str, method: str, batch: int, length: int, steps: int, device: str) -> dict:
    """Run ``steps`` training steps of ``method`` at (batch, length) in *this* process; returns peak MB and s/step.

    The first step warms up (allocator, kernels) and is not timed; the peak includes it.
    """
    import torch

    from stsreg.product.losses import build_loss
    from stsreg.product.model import SiameseRegressor

    torch.manual_seed(0)
    dev = torch.device(device)
    model = SiameseRegressor.from_pretrained(backbone, max_length=length).to(dev)
    model.train()
    vocab = model.encoder.config.vocab_size
    if dev.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats(dev)
        base = torch.cuda.memory_allocated(dev) / 2**20
    else:
        base = _rss_mb()
    spec = PROFILE[method]
    frozen, contrastive = spec.frozen, spec.loss == "contrastive"
    model.encoder.requires_grad_(not frozen)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-5)
    n_seq = spec.sequences
    loss_fn = build_loss("contrastive" if contrastive else "smooth_k2")  # with their declared defaults
    gen = torch.Generator().manual_seed(0)

    def batch_features():
        ids = torch.randint(1000 if vocab > 1000 else 5, vocab, (batch, length), generator=gen)
        return {"input_ids": ids.to(dev), "attention_mask": torch.ones(batch, length, dtype=torch.long, device=dev)}

    times = []
    for step in range(steps + 1):
        feats = [batch_features() for _ in range(n_seq)]
        t0 = time.perf_counter()
        if frozen:
            with torch.no_grad():
                u, v = model.embed(feats[0]), model.embed(feats[1])
            loss = loss_fn(model.score_embeddings(u, v), torch.rand(batch, device=dev) * 2)
        elif contrastive:
            loss = loss_fn(*(model.embed(f) for f in feats))
        else:
            loss = loss_fn(model(feats[0], feats[1])[2], torch.rand(batch, device=dev) * 5)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if dev.type == "cuda":
            torch.cuda.synchronize()
        if step:
            times.append(time.perf_counter() - t0)
    if dev.type == "cuda":
        peak = torch.cuda.max_memory_allocated(dev) / 2**20 - base
    else:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 - base  # ru_maxrss is in KB on Linux
    return {"method": method, "batch": batch, "length": length, "peak_mb": float(peak),
            "step_s": float(np.median(times)), "device": device, "status": "measured"}


def measure_in_subprocess(backbone: str, method: str, batch: int, length: int, steps: int, device: str,
                          timeout: float = 1800) -> dict:
    """:func:`measure` in a fresh Python process, so peaks of different configurations never mix."""
    cmd = [sys.executable, "-m", "stsreg.experiments.profiling.measure", "one", "--backbone", backbone, "--method",
           method, "--batch", str(batch),
           "--length", str(length), "--steps", str(steps), "--device", device]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        return {"method": method, "batch": batch, "length": length, "status": "failed",
                "error": proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _cli(argv=None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m stsreg.experiments.profiling.measure", description="Measure one profile configuration."
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    one = sub.add_parser("one", help="one configuration in this process; prints JSON")
    one.add_argument("--backbone", default="default")
    one.add_argument("--method", choices=METHODS, required=True)
    one.add_argument("--batch", type=int, required=True)
    one.add_argument("--length", type=int, required=True)
    one.add_argument("--steps", type=int, default=3)
    one.add_argument("--device", default="cpu")
    a = ap.parse_args(argv)
    print(json.dumps(measure(a.backbone, a.method, a.batch, a.length, a.steps, a.device)))
    return 0


if __name__ == "__main__":
    sys.exit(_cli())

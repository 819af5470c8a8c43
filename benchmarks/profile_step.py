"""Where a stage-2 training step spends its CPU time: ``torch.profiler`` over benchmark (b)'s stsreg side.

    python -m benchmarks.profile_step [--pairs 320] [--precision fp32|bf16|auto]

Trains ``--pairs`` STS train pairs (batch, max length and loss from params.yaml, as ``make bench`` (b) does) with
random and with length-grouped batches, and prints each run's pairs/s and the operators with the largest share of
self CPU time. The shares, not the absolute times, are what to compare (the profiler itself slows small operators).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import pandas as pd


def profile_training(params_path: str, sts_path: str, pairs: int, precision: str, top: int) -> None:
    import torch
    from torch.profiler import ProfilerActivity, profile

    from benchmarks.train_speed import short_dev, train_pairs, train_stsreg
    from stsreg.infra.config import load_params

    params = load_params(params_path)
    sts = pd.read_parquet(sts_path)
    train = train_pairs(sts, pairs, 0)
    dev = short_dev(sts)
    for grouped in (False, True):
        with tempfile.TemporaryDirectory() as work, profile(activities=[ProfilerActivity.CPU]) as prof:
            t0 = time.perf_counter()
            rate = train_stsreg(params.model.backbone, train, dev, params.stage2, params.model.max_length, Path(work),
                                 2, grouped, precision, "cpu")
            wall = time.perf_counter() - t0
        events = prof.key_averages()
        total = sum(e.self_cpu_time_total for e in events)
        print(f"group_by_length={grouped}: {rate:.1f} pairs/s, wall {wall:.1f} s, torch threads "
              f"{torch.get_num_threads()}")
        for e in sorted(events, key=lambda e: -e.self_cpu_time_total)[:top]:
            print(f"  {e.key:45s} {100 * e.self_cpu_time_total / total:5.1f}%  calls {e.count}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.profile_step", description=__doc__.split("\n\n")[0])
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--sts", default="data/prepared/sts.parquet")
    ap.add_argument("--pairs", type=int, default=320, help="training pairs per run (batch 16: 20 steps)")
    ap.add_argument("--precision", choices=["auto", "fp32", "bf16"], default="fp32")
    ap.add_argument("--top", type=int, default=14, help="operators listed per run")
    a = ap.parse_args(argv)
    profile_training(a.params, a.sts, a.pairs, a.precision, a.top)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The command layer's ``stsreg train``: how a training stage is launched — one process as a Prefect flow, or stage 2 as torchrun
processes (started by hand, or by this command itself when ``launch.stage2_nproc > 1``), each leaving the same outputs.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from stsreg.infra.config import load_params


def _discard_checkpoints(stage: str, ckpt_dir: Path, world_size: int) -> None:
    """``stsreg train --fresh``: remove the stage-2 checkpoint folder so training starts at step 0.

    Refused for stage 1 (it keeps no checkpoints) and under torchrun (another rank could already be reading the
    folder): delete it yourself before launching a distributed run."""
    if stage != "2":
        raise SystemExit("--fresh applies to stage 2 (stage 1 keeps no checkpoints)")
    if world_size > 1:
        raise SystemExit(f"--fresh is not taken under torchrun: delete {ckpt_dir} before launching")
    if ckpt_dir.exists():
        shutil.rmtree(ckpt_dir)
        print(f"--fresh: removed {ckpt_dir}")


def _relaunch_under_torchrun(nproc: int) -> int:
    """``launch.stage2_nproc > 1``: run this same command as ``nproc`` processes on this machine (torchrun,
    ``--standalone``; one per GPU, gloo processes on CPU). The children skip the pipeline lock this process holds."""
    import subprocess

    from stsreg.infra.locking import held_env

    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
           "-m", "stsreg.cli", *sys.argv[1:]]
    print(f"stage 2 on {nproc} processes: {' '.join(cmd[2:])}", flush=True)
    return subprocess.run(cmd, env=held_env(Path("."))).returncode


def cmd_train(args: argparse.Namespace) -> int:
    from stsreg.infra import runtime

    world_size = runtime.world()[0]
    if args.fresh:
        _discard_checkpoints(args.stage, Path(args.checkpoints), world_size)
    params = load_params(args.params)
    metrics = (args.metrics or f"metrics/stage{args.stage}.json") if args.metrics != "" else None
    if args.stage == "1":
        if world_size > 1:
            raise SystemExit("stage 1 runs in one process (its NLI encoder step is a single-process loop): run "
                             "`stsreg train --stage 1` without torchrun; stage 2 is the step that spreads over GPUs")
        from pipelines.product.stage1_flow import stage1_flow

        summary = stage1_flow(params_path=args.params, nli_path=args.nli, out_dir=args.stage1_dir, cache_dir=args.cache,
                              metrics_path=metrics)
    elif world_size == 1 and params.launch.stage2_nproc > 1:
        return _relaunch_under_torchrun(params.launch.stage2_nproc)
    else:
        stage2 = dict(params_path=args.params, sts_path=args.sts, init_dir=args.stage1_dir, out_dir=args.stage2_dir,
                      ckpt_dir=args.checkpoints, metrics_path=metrics, curves_dir=args.curves or None)
        if world_size > 1:  # under torchrun: every process runs the same loop, rank 0 writes (no Prefect flow per process)
            from pipelines.product.stage2_flow import tracked_stage2

            summary = tracked_stage2(**stage2)
        else:
            from pipelines.product.stage2_flow import stage2_flow

            summary = stage2_flow(**stage2)
    if runtime.is_main_process():
        shown = {k: v for k, v in summary.items() if not isinstance(v, (list, dict))}
        print(f"stage {args.stage}: " + ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in shown.items()))
    return 0

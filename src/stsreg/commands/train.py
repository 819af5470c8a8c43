"""``stsreg train``: stage 1 or stage 2 as a Prefect flow (stage 2 under torchrun when asked), its parser beside its
handler."""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path
from stsreg.commands import add_params
from stsreg.infra.config import load_params
from stsreg.infra.locking import held_env


def train(sub, name: str) -> None:
    t = sub.add_parser(name, help="run training stage 1 (head on NLI) or 2 (fine-tune on STS) as a Prefect flow",
                       description="Stage 1: the encoder trained on NLI (stage1.encoder.objective), then frozen while "
                                   "the head trains on cached NLI embeddings. Stage 2: everything fine-tuned on STS-B "
                                   "+ SICK-R train, best STS-B dev checkpoint kept, resumable; under torchrun (or "
                                   "launch.stage2_nproc > 1) as DDP, rank 0 writing the same outputs and MLflow run "
                                   "as one process.")
    t.add_argument("--stage", choices=["1", "2"], required=True, help="1: NLI (encoder step, head); 2: STS fine-tuning")
    add_params(t)
    t.add_argument("--nli", default="data/prepared/nli_train.parquet", help="stage 1: the NLI training table")
    t.add_argument("--sts", default="data/prepared/sts.parquet", help="stage 2: the STS table (train and dev rows)")
    t.add_argument("--stage1-dir", default="models/stage1", help="stage 1's model (stage 2 starts from it)")
    t.add_argument("--stage2-dir", default="models/stage2", help="stage 2's model")
    t.add_argument("--cache", default="cache/embeddings", help="stage-1 embedding cache")
    t.add_argument("--checkpoints", default="checkpoints/stage2", help="stage-2 resumable checkpoints")
    t.add_argument("--fresh", action="store_true",
                   help="stage 2: delete --checkpoints and train from step 0 (a checkpoint of other code, settings or "
                        "data is never resumed anyway)")
    t.add_argument("--metrics", default=None, help="headline metrics file (none given: metrics/stage<N>.json; '' = "
                                                   "none)")
    t.add_argument("--curves", default="reports/stage2", help="stage 2: folder for dev_curve.csv and loss_curve.csv "
                                                              "('' = none)")
    t.set_defaults(func=cmd_train)


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
        # under torchrun: every process runs the same loop, rank 0 writes (no Prefect flow per process)
        if world_size > 1:
            from pipelines.product.stage2_flow import tracked_stage2

            summary = tracked_stage2(**stage2)
        else:
            from pipelines.product.stage2_flow import stage2_flow

            summary = stage2_flow(**stage2)
    if runtime.is_main_process():
        shown = {k: v for k, v in summary.items() if not isinstance(v, (list, dict))}
        print(f"stage {args.stage}: " + ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                                                  for k, v in shown.items()))
    return 0

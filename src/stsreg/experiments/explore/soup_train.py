"""Train the soup's ingredients and keep their models (see soup.py): one compare-like ``ours_cos`` row per (map,
seed)."""

from __future__ import annotations

import argparse
from pathlib import Path

from stsreg.experiments.explore.cos_scale import STS, name_of, row_params, stage1_of

MODELS = Path("checkpoints/explore_soup")  # gitignored: ~88 MB per model


def model_dir(a: float, b: float, seed: int) -> Path:
    return MODELS / f"{name_of(a, b)}-{seed}"


def train(params, seed: int, a: float, b: float) -> Path:
    """The comparison's ``ours_cos`` row of ``seed`` with the map (a, b): its stage-1 start, 1 epoch, the best STS-B
    dev checkpoint after step 0; resumes from its checkpoint folder after a kill."""
    from stsreg.product.model import SiameseRegressor
    from stsreg.product.runners.stage2_runner import run_stage2
    from stsreg.product.runners.start import Start

    out = model_dir(a, b, seed)
    if (out / "training_summary.json").exists():
        return out
    run_stage2(Start(SiameseRegressor.load(stage1_of(seed)), row_params(params, seed, cos_a=a, cos_b=b)), STS, out,
               MODELS / f"_ckpt-{out.name}", keep="trained")
    return out


def main(argv=None) -> int:
    from stsreg.infra.config import load_params

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[42, 43, 44])
    ap.add_argument("--maps", nargs="+", default=["5,0", "7.5,-2.5"], help="a,b pairs")
    args = ap.parse_args(argv)
    params = load_params("params.yaml")
    for seed in args.seeds:
        for m in args.maps:
            print(train(params, seed, *map(float, m.split(","))), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

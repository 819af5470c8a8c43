"""Stage-2 flow: the whole model fine-tuned on STS-B + SICK-R train, the best STS-B dev checkpoint kept (one task,
one MLflow run; :mod:`pipelines.product.training_run`). With ``curves_dir`` the task writes the STS-B dev curve and the
training-loss curve (DVC plots).

    python -m pipelines.product.stage2_flow
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd
from prefect import flow, task

from pipelines.product.training_run import EXPERIMENT, finish, logged, run_tags
from stsreg.infra import atomic, runtime, tracking
from stsreg.infra.config import load_params
from stsreg.product import model_card
from stsreg.product.lineage import log_tables
from stsreg.product.model_files import set_max_length, write_st_config
from stsreg.product.runners.stage2_runner import run_stage2
from stsreg.product.champion_pin import PIN_FILE
from stsreg.product.runners.warm_start import starting_point


def _write_curves(summary: dict, out: Path) -> None:
    """``dev_curve.csv`` (step, dev_spearman) and ``loss_curve.csv`` (step, train_loss: the mean over each window of
    ``training.stage2.LOSS_WINDOW`` steps) under ``out``: the DVC plots of the stage."""
    atomic.to_csv(pd.DataFrame(summary["dev_curve"], columns=["step", "dev_spearman"]), out / "dev_curve.csv")
    atomic.to_csv(pd.DataFrame(summary["loss_curve"], columns=["step", "train_loss"]), out / "loss_curve.csv")


def publish(params, folder: Path, summary: dict) -> None:
    """Make the trained folder what users expect of a sentence-transformers model: its card (README.md, with the dev
    score that kept it) and the similarity function (cosine), so ``SentenceTransformer("models/stage2")`` loads it
    as the project scores it, truncating where it is evaluated and served (``evaluate.max_length``, not the training
    length), whichever command loads it."""
    write_st_config(folder)
    set_max_length(folder, params.evaluate.max_length)
    (folder / "README.md").write_text(model_card.render_trained(params, folder, summary))


def tracked_stage2(params_path: str, sts_path: str, init_dir: str, out_dir: str, ckpt_dir: str,
                   metrics_path: str | None = None, curves_dir: str | None = None) -> dict:
    """Stage 2 with its MLflow run, metrics file and curves: the one body of the flow's task and of
    ``stsreg train --stage 2`` under torchrun. Every process trains; rank 0 alone (the one that evaluates and saves)
    opens the run and writes the outputs, so N processes leave what one process leaves."""
    # the champion champion.json pins (beside params.yaml; its epochs and lr replace stage 2's), or models/stage1
    start = starting_point(load_params(params_path), Path(init_dir), pin_path=Path(params_path).parent / PIN_FILE)
    params = start.params
    if not runtime.is_main_process():
        return run_stage2(start, Path(sts_path), Path(out_dir), Path(ckpt_dir))
    tags = run_tags([sts_path]) | {f"warm_start.{k}": str(v) for k, v in start.origin.items() if k != "from"}
    with tracking.tracked_run(EXPERIMENT, "stage2", logged(params, "2"), tags) as run:
        p = params.stage2  # lineage: the tables trained on and the one selected on, as MLflow datasets
        log_tables(tracking.client(run.uri), run.run_id, sts_path,
                   {"training": [(t, "train") for t in p.train_tables], "validation": [(p.dev_table, "dev")]})
        summary = run_stage2(start, Path(sts_path), Path(out_dir), Path(ckpt_dir), run)
        publish(params, Path(out_dir), summary)
        if curves_dir:
            _write_curves(summary, Path(curves_dir))
        return finish("2", run, summary, out_dir, metrics_path)


@task(name="stage2")
def stage2_task(params_path: str, sts_path: str, init_dir: str, out_dir: str, ckpt_dir: str,
                metrics_path: str | None = None, curves_dir: str | None = None) -> dict:
    return tracked_stage2(params_path, sts_path, init_dir, out_dir, ckpt_dir, metrics_path, curves_dir)


@flow(name="stsreg-stage2")
def stage2_flow(params_path: str = "params.yaml", sts_path: str = "data/prepared/sts.parquet",
                init_dir: str = "models/stage1", out_dir: str = "models/stage2", ckpt_dir: str = "checkpoints/stage2",
                metrics_path: str | None = None, curves_dir: str | None = None) -> dict:
    return stage2_task(params_path, sts_path, init_dir, out_dir, ckpt_dir, metrics_path, curves_dir)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description="Run training stage 2 as a Prefect flow.")
    ap.add_argument("--params", default="params.yaml")
    print(stage2_flow(params_path=ap.parse_args().params))

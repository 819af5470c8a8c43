"""Profile flow: the memory / step-time grid of :mod:`stsreg.experiments.profiling` (the paper's Table 4) as one Prefect
flow.

Each configuration is a task that runs in its own subprocess; finished measurements are kept in
``reports/profile/points/`` keyed by backbone, device, configuration, steps, library versions and the code, so an
interrupted grid resumes. One MLflow run (experiment ``stsreg-profile``) gets the params, ``memory_ratio`` and the
other headline metrics, the table, the CSV and the plot.

    stsreg profile                      # or: dvc repro profile
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

from prefect import flow, task

from stsreg.infra import atomic, runtime, tracking
from stsreg.infra.codehash import code_hash
from stsreg.infra.config import load_params
from stsreg.infra.hashing import fingerprint
from stsreg.experiments.profiling.grid import GridSpec, run_grid, summarize
from stsreg.experiments.profiling.measure import measure_in_subprocess
from stsreg.experiments.profiling.profile_table import format_table, plot, results_frame

EXPERIMENT = "stsreg-profile"
# what a measurement depends on: the code the measuring subprocess (`python -m stsreg.experiments.profiling.measure`)
# runs;
# config.py (defaults, validation) is left out: the measured settings themselves are in the key
MEASURE_CODE = ("stsreg.experiments.profiling.measure",)
MEASURE_CODE_EXCLUDE = ("stsreg.infra.config",)


def _point_key(backbone: str, device: str, device_label: str, method: str, batch: int, length: int, steps: int) -> str:
    import torch
    import transformers

    parts = [backbone, device, device_label, method, batch, length, steps,
             torch.__version__, transformers.__version__, code_hash(MEASURE_CODE, exclude=MEASURE_CODE_EXCLUDE)]
    return fingerprint(parts)


@task(name="profile-config", task_run_name="{method}-b{batch}-len{length}")
def profile_config(backbone: str, device: str, device_label: str, method: str, batch: int, length: int, steps: int,
                   points_dir: str) -> dict:
    """One measured configuration (reused from ``points_dir`` when the same key already ran)."""
    key = _point_key(backbone, device, device_label, method, batch, length, steps)
    cached = Path(points_dir) / f"{method}-b{batch}-len{length}-{key}.json"
    if cached.exists():
        return json.loads(cached.read_text())
    row = measure_in_subprocess(backbone, method, batch, length, steps, device)
    if row["status"] == "measured":  # failures (e.g. out of memory) are retried on the next run
        atomic.write_text(cached, json.dumps(row))
    return row


@flow(name="stsreg-profile")
def profile_flow(params_path: str = "params.yaml", out_dir: str = "reports/profile",
                 metrics_path: str = "metrics/profile.json") -> dict:
    params = load_params(params_path)
    p = params.profile
    dev = runtime.resolve_device(p.device)
    device, device_label = str(dev), runtime.device_name(dev)  # "cuda:0" / "cpu"; the GPU's name / "cpu"
    spec = GridSpec(p.methods, p.batch_sizes, p.lengths, (p.headline_batch, p.headline_length),
                            (p.reference_batch, p.reference_length), p.memory_budget_mb, p.max_step_s)
    out = Path(out_dir)
    points = out / "points"

    def measure(method, batch, length):
        return profile_config(params.model.backbone, device, device_label, method, batch, length, p.steps, str(points))

    def show(row):
        shown = (
            f"{row['peak_mb']:.0f} MB, {row['step_s']:.2f} s/step"
            if row["status"] == "measured"
            else row.get("reason") or row.get("error")
        )
        print(f"profile {row['method']:<17} b{row['batch']:<4} len{row['length']:<4} {row['status']}: {shown}",
              flush=True)

    logged = {"grid": dataclasses.asdict(spec), "steps": p.steps, "device": device, "backbone": params.model.backbone}
    with tracking.tracked_run(EXPERIMENT, f"profile-{device}", logged,
                              tracking.environment_tags(device_label)) as run:
        rows = run_grid(spec, measure, log=show)
        df = results_frame(rows, spec)
        summary = summarize(rows, spec)
        atomic.to_csv(df.drop(columns="device", errors="ignore"), out / "profile.csv")
        atomic.write_text(out / "table.md", format_table(df, spec, device_label) + "\n")
        # `dvc plots`: memory vs length, one series per method and batch
        atomic.to_csv(df.assign(series=df.method + " b" + df.batch.astype(str))[["series", "length", "shown_mb",
                                                                                 "status"]]
                      .rename(columns={"shown_mb": "peak_mb"}), out / "plot.csv")
        plot(df, spec, out / "memory_vs_length.png")
        summary["device"] = device_label
        atomic.write_text(metrics_path, json.dumps(summary, indent=2))  # last
        tracking.log_report(run.run_id, summary, out, ("table.md", "profile.csv", "memory_vs_length.png"), "profile")
    print((out / "table.md").read_text())
    print(f"memory_ratio = {summary['memory_ratio']:.3f} (regression_full b{p.headline_batch}/len{p.headline_length} "
          f"{summary['regression_full_headline_mb']:.0f} MB{' predicted' if summary['headline_predicted'] else ''} / "
          f"contrastive b{p.reference_batch}/len{p.reference_length} {summary['contrastive_reference_mb']:.0f} MB"
          f"{' predicted' if summary['reference_predicted'] else ''})")
    return summary


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description="Run the memory / step-time profile grid as a Prefect flow.")
    ap.add_argument("--params", default="params.yaml")
    print(profile_flow(params_path=ap.parse_args().params))

"""Benchmark (f) of ``make bench``: time to a champion. ``make run``'s compute (``dvc repro promote``, fetch to
promote, install excluded) against the sentence-transformers script it replaces (``benchmarks/st_cosent.py``: CoSENT,
3 epochs, batch 16, lr 2e-5, same training rows), in one run on one machine, each with the 7-task scores the
project's evaluation gives its model.

The pipeline runs in a scratch clone of the project's last commit (its own MLflow store and DVC outputs, the same
raw files), so the bench neither touches the project's registry nor reuses a stage.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SCORES = ("avg7_spearman", "avg7_unseen_spearman", "stsb_dev_spearman")


def _env(mirror: str) -> dict:
    """The bench's environment: no server, no tracking URI of the user's, the project's raw files."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "PREFECT_API"))}
    return {**env, "STSREG_DATA_MIRROR": mirror, "STSREG_USE_SERVERS": "0",
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"}


def _timed(cmd: list[str], cwd: Path, env: dict, log: Path) -> float:
    started = time.perf_counter()
    with open(log, "w") as fh:
        proc = subprocess.run(cmd, cwd=cwd, env=env, stdout=fh, stderr=subprocess.STDOUT)
    if proc.returncode:
        raise RuntimeError(f"`{' '.join(cmd)}` failed (exit {proc.returncode}); see {log}")
    return time.perf_counter() - started


def bench_champion(mirror: str, work: Path) -> dict:
    """Both sides, one after the other; seconds, scores, and the pipeline's per-step table."""
    from stsreg.product.timings import format_timings

    env = _env(mirror)
    clone = work / "clone"
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
    pipeline = _timed(["dvc", "repro", "promote"], clone, env, work / "pipeline.log")
    ours = json.loads((clone / "metrics/eval.json").read_text())
    steps = format_timings(clone / "data/prepared/summary.json", f"sqlite:///{clone / 'mlflow/mlflow.db'}")
    st = _timed([sys.executable, str(REPO / "benchmarks/st_cosent.py"), "--sts",
                 str(clone / "data/prepared/sts.parquet"),
                 "--out", str(work / "st-model")], clone, env, work / "st.log")
    _timed(["stsreg", "evaluate", "--model", str(work / "st-model"), "--out", str(work / "st-eval"), "--headline",
            str(work / "st-eval.json")], clone, env, work / "st-eval.log")
    theirs = json.loads((work / "st-eval.json").read_text())
    return {"unit": "s", "samples": {"make_run": [pipeline], "st_script": [st]}, "ratio": pipeline / st,
            "scores": {"make_run": {k: ours[k] for k in SCORES}, "st_script": {k: theirs[k] for k in SCORES}},
            "steps": steps}


def format_champion(r: dict) -> list[str]:
    """The lines under the bench table: both sides' scores and the pipeline's steps."""
    s = r["scores"]
    row = lambda name, label: (f"| {label} | {r['samples'][name][0] / 60:.1f} min | {s[name]['avg7_spearman']:.2f} "
                               f"| {s[name]['avg7_unseen_spearman']:.2f} | {s[name]['stsb_dev_spearman']:.2f} |")
    return ["", "Time to a champion (`champion`: one run of each side, one after the other, on this machine):", "",
            "| side | compute | avg7 | avg7 unseen | STS-B dev |", "|---|---:|---:|---:|---:|",
            row("make_run", "`make run` (dvc repro promote: fetch .. promote)"),
            row("st_script", "sentence-transformers script (benchmarks/st_cosent.py), scored by `stsreg evaluate`"),
            "", "The pipeline's steps in that run:", "", r["steps"]]

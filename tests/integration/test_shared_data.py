"""The real raw files in ../shared/data: exact published counts, and the measured leakage.

Skipped when ../shared/data is absent (set STSREG_SHARED_DATA to point elsewhere).
"""

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from stsreg.cli import main
from tests.conftest import REPO, SHARED_DATA

pytestmark = [pytest.mark.shared_data,
              pytest.mark.skipif(not (SHARED_DATA / "SOURCES.json").exists(), reason="../shared/data not present")]


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("shared")
    # run from tmp: the CLI takes the pipeline lock of its working directory, and a pipeline running in the
    # developer's checkout (which holds that lock for hours) must not stall this test
    with contextlib.chdir(tmp):
        assert main(["fetch", "--params", str(REPO / "params.yaml"), "--registry", str(REPO / "data/sources.json"),
                     "--mirror", str(SHARED_DATA), "--out", str(tmp / "raw"), "--no-download"]) == 0
        assert main(["prepare", "--params", str(REPO / "params.yaml"), "--raw", str(tmp / "raw"),
                     "--registry", str(REPO / "data/sources.json"),
                     "--prepared", str(tmp / "prepared"), "--rejected", str(tmp / "rejected"),
                     "--metrics", str(tmp / "data.json")]) == 0
    return tmp


def test_exact_counts(prepared):
    sts = pd.read_parquet(prepared / "prepared/sts.parquet")
    counts = sts.groupby(["dataset", "split"]).size().to_dict()
    assert counts == {
        ("sts12", "test"): 3108, ("sts13", "test"): 1500, ("sts14", "test"): 3750, ("sts15", "test"): 3000,
        ("sts16", "test"): 1186,
        ("stsb", "train"): 5749, ("stsb", "dev"): 1500, ("stsb", "test"): 1379,
        ("sickr", "train"): 4500, ("sickr", "dev"): 500, ("sickr", "test"): 4927,
    }
    nli = pd.read_parquet(prepared / "prepared/nli.parquet")
    assert nli.groupby(["source", "split"]).size().to_dict() == {
        ("snli", "dev"): 9842, ("snli", "test"): 9824, ("mnli", "dev_matched"): 9815,
        ("xnli", "dev"): 2490, ("xnli", "test"): 5010,
        ("anli", "dev_r1"): 1000, ("anli", "dev_r2"): 1000, ("anli", "dev_r3"): 1198,
        ("snli_cad", "train"): 8330, ("snli_cad", "dev"): 1000, ("snli_cad", "test"): 2000,
    }
    # label balance of SNLI dev as published (3329 E / 3235 N / 3278 C)
    snli_dev = nli[(nli.source == "snli") & (nli.split == "dev")].label.value_counts().to_dict()
    assert snli_dev == {2: 3329, 1: 3235, 0: 3278}
    metrics = json.loads((prepared / "prepared/summary.json").read_text())
    assert metrics["rejected_total"] == 0
    assert metrics["datasets"]["sts15"]["unscored_skipped"] == 8500 - 3000
    assert len(pd.read_parquet(prepared / "prepared/nli_train.parquet")) == metrics["nli_train_rows"] == 51509


def test_leakage_counts(prepared):
    leak = json.loads((prepared / "prepared/summary.json").read_text())["leakage"]
    assert {t: d["unseen_normalized"] for t, d in leak.items()} == {
        "sts12": 2106, "sts13": 903, "sts14": 1889, "sts15": 1898, "sts16": 989, "stsb": 1367, "sickr": 4846}
    assert {t: d["seen_exact"] for t, d in leak.items()} == {
        "sts12": 999, "sts13": 597, "sts14": 1860, "sts15": 1102, "sts16": 197, "stsb": 7, "sickr": 49}
    sts = pd.read_parquet(prepared / "prepared/sts.parquet")
    per_subset = sts[sts.dataset == "sts14"].groupby("subset").seen_in_train.sum().to_dict()
    assert per_subset == {"OnWN": 0, "deft-forum": 450, "deft-news": 300, "headlines": 613, "images": 498,
                          "tweet-news": 0}


def test_dvc_repro_twice_on_a_copy_of_the_repo(tmp_path):
    """`dvc repro prepare` runs fetch -> prepare; a second one runs nothing (training stages are not part
    of this test: they take ~11 minutes here)."""
    files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"], cwd=REPO,
                           capture_output=True, check=True).stdout.decode().split("\0")
    work = tmp_path / "repo"
    for rel in filter(None, files):
        src = REPO / rel
        if src.is_file():
            (work / rel).parent.mkdir(parents=True, exist_ok=True)
            (work / rel).write_bytes(src.read_bytes())
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
           "STSREG_DATA_MIRROR": str(SHARED_DATA), "DVC_NO_ANALYTICS": "1"}
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(git + ["init", "-q"], cwd=work, check=True)
    subprocess.run(git + ["add", "-A"], cwd=work, check=True)
    subprocess.run(git + ["commit", "-qm", "copy"], cwd=work, check=True)
    dvc = [str(Path(sys.executable).parent / "dvc"), "repro", "prepare"]
    first = subprocess.run(dvc, cwd=work, env=env, capture_output=True, text=True)
    assert first.returncode == 0, first.stdout + first.stderr
    assert (work / "data/prepared/sts.parquet").exists()
    second = subprocess.run(dvc, cwd=work, env=env, capture_output=True, text=True)
    assert second.returncode == 0, second.stderr
    assert "Data and pipelines are up to date." in second.stdout
    assert "Running stage" not in second.stdout


#: SPEC's reference row of the untouched all-MiniLM-L6-v2 (mean pooling, max length 256): Spearman x100 per task.
REFERENCE_ROW = {"sts12": 72.37, "sts13": 80.60, "sts14": 75.60, "sts15": 85.39, "sts16": 78.99, "stsb": 82.03,
                 "sickr": 77.15}


@pytest.mark.slow
def test_evaluator_reproduces_the_reference_row_of_the_untouched_backbone(prepared):
    """SPEC: all-MiniLM-L6-v2, mean pooling, max length 256 -> 72.37 / 80.60 / 75.60 / 85.39 / 78.99 / 82.03 /
    77.15, avg7 78.87, avg7 unseen 78.66, STS-B dev 86.72 (the MTEB figures agree to the hundredth)."""
    from stsreg.product.sts_eval import eval_pairs, score_pairs, task_metrics
    from stsreg.product.runners.eval_runner import load_for_eval

    pairs = eval_pairs(pd.read_parquet(prepared / "prepared/sts.parquet"))
    # the reference row is fp32 arithmetic: reproduced exactly there
    m = task_metrics(score_pairs(load_for_eval("default", max_length=256, precision="fp32"), pairs,
                                 show_progress=False))
    expected = REFERENCE_ROW
    assert {t: round(m[f"{t}_spearman"], 2) for t in expected} == expected
    # avg7 sits on a rounding edge: fp32 on one AMD EPYC gives 78.87502 (the same with the code of either layout),
    # elsewhere 78.8749x; both are the reference's 78.87 to within 0.01
    assert abs(m["avg7_spearman"] - 78.87) < 0.01
    assert m["avg7_spearman"] == pytest.approx(sum(m[f"{t}_spearman"] for t in expected) / 7)
    assert round(m["avg7_unseen_spearman"], 2) == 78.66 and round(m["stsb_dev_spearman"], 2) == 86.72


def _native_bf16_cpu() -> bool:
    import torch

    from stsreg.product.precision import native_bf16

    return native_bf16(torch.device("cpu"))


@pytest.mark.slow
@pytest.mark.skipif(not _native_bf16_cpu(), reason="bf16 is what `auto` picks only where the CPU has it natively; "
                    "emulated, the full evaluation outlasts the test's timeout")
def test_bf16_evaluation_stays_within_0_1_of_the_reference_row(prepared):
    """bf16 (what ``model.precision: auto`` picks on CPUs with native bf16) within 0.1 of the fp32 reference row on
    every task and avg7 (the speed issue's criterion)."""
    from stsreg.product.sts_eval import eval_pairs, score_pairs, task_metrics
    from stsreg.product.runners.eval_runner import load_for_eval

    pairs = eval_pairs(pd.read_parquet(prepared / "prepared/sts.parquet"))
    b = task_metrics(score_pairs(load_for_eval("default", max_length=256, precision="bf16"), pairs,
                                 show_progress=False))
    reference = {**REFERENCE_ROW, "avg7": 78.87}
    drift = {t: abs(b[f"{t}_spearman"] - v) for t, v in reference.items()}
    assert max(drift.values()) < 0.1, drift

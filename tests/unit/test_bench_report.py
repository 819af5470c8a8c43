"""The benchmark reports: ratios against targets with the date each row was measured, the CPU's bf16 flags, and the
stage-2 A/B table grouped by precision and batching."""

from benchmarks.bench_report import format_report
from benchmarks.stage2_ab import format_report as ab_report
from stsreg.infra.config import Params

MACHINE = {"cpu": "Some CPU", "cpu_flags": ["avx512_bf16", "avx512f"], "native_bf16": True, "torch_threads": 2,
           "cores": 2, "torch": "2.13.0", "python": "3.11", "date": "2026-01-02 03:04"}


def test_bench_report_rows_targets_dates_and_flags():
    results = {"machine": MACHINE, "repeats": 3, "precision": "auto", "benchmarks": {
        "encode": {"unit": "sentences/s", "samples": {"stsreg": [700.0], "stsreg_fp32": [420.0],
                                                      "sentence_transformers": [350.0]},
                   "ratio": 2.0, "precision": "bf16", "date": "2026-01-01 00:00",
                   "stsb_test_spearman": {"stsreg": 82.05, "stsreg_fp32": 82.03, "sentence_transformers": 82.03}},
        "train_grouped": {"unit": "pairs/s", "samples": {"stsreg": [60.0], "sentence_transformers": [20.0]},
                          "ratio": 3.0}}}
    md = format_report(results)
    # the reference is the last side (not the fp32 twin); a miss says by how much; each row has its date
    assert (
        "| 700.00 sentences/s | 350.00 sentences/s (sentence_transformers) | 2.000 | >= 3.0 | no (missed by 33.3%) | "
        "2026-01-01 00:00 |"
        in md
    )
    assert "| 3.000 | >= 2.0 | yes | 2026-01-02 03:04 |" in md  # no own date: the run's
    assert "avx512_bf16, avx512f; native bf16: True" in md
    assert "stsreg (bf16) 82.05, stsreg fp32 82.03, sentence-transformers 82.03" in md
    assert "stsreg in fp32 encodes 420.00 sentences/s: 1.200x" in md


def test_stage2_ab_report_means_per_precision_and_batching():
    run = lambda prec, grouped, seed, dev, avg7: {"run": f"{prec}:{seed}", "precision": prec,
                                                  "group_by_length": grouped,  # noqa: E731
                                               "seed": seed, "wall_s": 120.0, "pairs_per_s": 50.0, "start_dev": 86.0,
                                               "best_dev": dev, "best_step": 600, "avg7": avg7, "avg7_unseen": avg7 - 1}
    runs = [run("fp32", False, 1, 89.0, 82.0), run("bf16", True, 1, 89.2, 82.2), run("bf16", True, 2, 89.0, 82.4)]
    md = ab_report(runs, {**MACHINE}, Params())
    assert "| bf16 | grouped | 2 | 50.0 | 89.10 | 82.30 | 81.30 |" in md
    assert "| fp32 | random | 1 | 2.0 | 50.0 | 86.00 | 89.00 (600) | 82.00 | 81.00 |" in md


def test_rows_are_kept_only_from_the_same_machine_and_gpu_reports_name_the_gpu():
    from benchmarks.bench_report import same_machine

    # the same CPU name with and without avx512_bf16 is two machines: their rows must not share a table
    assert same_machine(MACHINE, {**MACHINE, "date": "later"})
    assert not same_machine(MACHINE, {**MACHINE, "cpu_flags": ["avx512f"]})
    assert not same_machine(MACHINE, {**MACHINE, "gpu": "NVIDIA H100"})
    gpu = {**MACHINE, "gpu": "NVIDIA H100 80GB HBM3", "gpu_native_bf16": True, "cores": 16}
    md = format_report({"machine": gpu, "repeats": 3, "precision": "auto", "benchmarks": {
        "train": {"unit": "pairs/s", "samples": {"stsreg": [900.0], "sentence_transformers": [600.0]}, "ratio": 1.5}}})
    assert md.startswith("# Benchmarks on a GPU")
    assert "on NVIDIA H100 80GB HBM3 (native bf16: True; host Some CPU, 16 cores, torch 2.13.0" in md


def test_bench_cli_device_choices_and_cpu_hides_gpus(monkeypatch, tmp_path):
    import os

    import pytest

    from benchmarks import bench

    with pytest.raises(SystemExit):
        bench.main(["--device", "tpu"])
    # --device cpu hides GPUs before anything (torch, stage 1, sentence-transformers) can pick one
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    with pytest.raises(FileNotFoundError):
        bench.main(["--device", "cpu", "--sts", str(tmp_path / "missing.parquet"), "--out", str(tmp_path / "b")])
    assert os.environ["CUDA_VISIBLE_DEVICES"] == ""
    assert set(bench.DEVICE_BENCHMARKS) < set(bench.TARGETS)


def test_inference_report_rows_ratios_and_targets_met_or_missed():
    from benchmarks.inference_report import format_report as inference_report

    row = lambda rate, avg7, long_rate=None: {"avg7": avg7, "stsb_test_spearman": 86.1,  # noqa: E731
                                              "short": {"sentences_per_s": rate, "p50_ms": 10.0, "p95_ms": 14.0},
                                              "long": {"sentences_per_s": long_rate or rate / 4, "p50_ms": 30.0,
                                                       "p95_ms": 40.0}}
    result = {"machine": {**MACHINE, "native_bf16": False}, "threads": 2, "repeats": 3, "model": "models:/m@champion",
              "sets": {"short": 2758, "long": 400},
              "rows": {"torch fp32": row(400.0, 84.12), "torch bf16": row(100.0, None),
                       "onnx int8": row(1000.0, 83.70)},
              "served": {"torch fp32": {"backend": "torch", "p50_ms": 20.0, "p95_ms": 25.0},
                         "auto": {"backend": "onnx-int8", "p50_ms": 12.0, "p95_ms": 15.0}}, "served_n": 200}
    md = inference_report(result, "python -m benchmarks.inference --repeats 3")
    assert "| onnx int8 | 83.70 | 86.10 | 1000 | 2.50x | 10.0 | 14.0 | 250 | 2.50x | 30.0 | 40.0 |" in md
    assert "| torch bf16 | - |" in md  # no avg7 where registration did not score the row
    # MACHINE has no VNNI/AMX flag: the miss says that int8 runs on AVX2 there
    assert ("ONNX int8 >= 3x torch fp32 on short texts: **2.50x** (missed; int8 dot products here: neither AVX512-VNNI "
            "nor AMX on this CPU, so int8 matrix products run on AVX2); avg7 drop <= 0.3: **+0.42** (missed)") in md
    assert "ONNX int8 faster than torch bf16: 10.00x (met; bf16 native here: False)" in md
    assert "12.0 vs 20.0 ms = **0.60x** (missed: the encoder's own batch-1 p50 is 10.0 ms (torch fp32) vs 10.0 ms" in md
    assert "`python -m benchmarks.inference --repeats 3` on Some CPU" in md


def test_loop_report_counts_from_the_added_rows_to_the_new_versions_first_answer(tmp_path):
    """`make bench-loop`'s report: the phases of the retrain's clock, the load's first answer from the new version
    as the end, the failed requests, and no verdict on a CPU that trains in fp32 (the target is for native bf16)."""
    from benchmarks.loop_report import markdown, summarise
    from stsreg.product.loop_clock import Clock, format_clock

    clock = Clock(origin=1000.0)
    clock.add("trigger", 1000.0, 1010.0)
    clock.add("stage2", 1010.0, 1400.0, ran=True)
    clock.add("promote", 1400.0, 1430.0, ran=True)
    clock.add("served", 1430.0, 1450.0)
    report = {"clock": clock.as_dict(), "promoted": True, "new_version": True, "summary": "promoted to champion",
              "trigger": {"rows_added": 318}, "served": {"version": 2, "answered": 1450.0}}
    load = {"sent": 900, "failed": 0, "errors": [], "p50_ms": 12.0, "p99_ms": 40.0, "max_ms": 90.0, "versions": {}}
    measured = {"project": str(tmp_path), "report": report, "load": load, "data_added_at": 1000.0,
                "load_new_version_at": 1452.0, "data_add_s": 3.0, "serve_ready_s": 20.0, "load_every_s": 0.5}
    s = summarise(measured, ["stage2.epochs=1"])
    assert s["total_min"] == round(452 / 60, 2) and s["new_version_answered_s"] == 452.0
    text = markdown(s, format_clock(report))
    assert "`stsreg data add` of 318 rows took 3.0 s" in text and "**0 failed**" in text
    assert "| stage2 | 6:30.0 | 6:40.0 |" in text and "overrides: `stage2.epochs=1`" in text
    assert "not judged here: this CPU trains in ?" in text  # no training summary in this project: not bf16
    (tmp_path / "models/stage2").mkdir(parents=True)
    (tmp_path / "models/stage2/training_summary.json").write_text('{"precision": "bf16"}')
    assert "**7.5 min** (target <= 15 min on 2 cores with native bf16): met." in markdown(
        summarise(measured, []), format_clock(report))


def test_the_loop_bench_asks_the_projects_own_registry_for_its_first_champion(tmp_path, monkeypatch):
    """A clone carries its origin's committed ``reports/registry/promotion.json``: round 1 is still needed while the
    clone's own store has no champion, whatever store the caller exported."""
    from benchmarks.loop import _has_champion

    (tmp_path / "reports/registry").mkdir(parents=True)
    (tmp_path / "reports/registry/promotion.json").write_text('{"promoted": true}')
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'callers.db'}")
    assert not _has_champion(tmp_path)
    assert (tmp_path / "mlflow/mlflow.db").exists() and not (tmp_path / "callers.db").exists()


def test_retrains_of_the_loop_compare_side_by_side(tmp_path):
    """`python -m benchmarks.loop_report cold=... warm=...`: one row per retrain, where stage 2 started, its steps and
    time, the dev score kept (and at step 0), each gated table's gain with its interval, and the total."""
    import json

    from benchmarks.loop_report import compare, summarise
    from stsreg.product.loop_clock import Clock

    runs = {}
    for label, origin, steps, took in (("cold", {"from": "stage1"}, 375, 300.0),
                                       ("warm", {"from": "champion", "version": 1, "run_id": "r"}, 125, 100.0)):
        project = tmp_path / label
        (project / "models/stage2").mkdir(parents=True)
        (project / "reports/registry").mkdir(parents=True)
        (project / "models/stage2/training_summary.json").write_text(json.dumps(
            {"precision": "fp32", "steps": steps, "start_dev_spearman": 70.0, "best_dev_spearman": 75.5,
             "best_step": steps, "started_from": origin}))
        (project / "reports/registry/promotion.json").write_text(json.dumps(
            {"champion": 1, "tests": {"qa": {"diff": 0.5, "low": -0.25, "high": 1.25, "p_value": 0.1}}}))
        clock = Clock(origin=0.0)
        clock.add("stage2", 10.0, 10.0 + took, ran=True)
        report = {"clock": clock.as_dict(), "promoted": False, "summary": "kept", "served": {}}
        runs[label] = summarise({"project": str(project), "report": report, "data_added_at": 0.0, "data_add_s": 1.0,
                                 "serve_ready_s": 1.0, "load": {}}, [])
    table = compare(runs)
    assert "| cold | stage 1 | 375 | 5:00.0 | 75.50 (70.00) | +0.50 [-0.25, +1.25] | no | 5.2 min |" in table
    assert "| warm | champion v1 | 125 | 1:40.0 | 75.50 (70.00) | +0.50 [-0.25, +1.25] | no | 1.8 min |" in table


def test_the_learning_curve_report_scores_fixed_pairs_follows_the_champion_and_judges_the_goal(tmp_path):
    """benchmarks.learn_report: each round's task score on the same pairs (Spearman x100 with its interval), the
    champion each kind serves after the round (it moves only on a promotion), the last round's goal, the plot."""
    import json

    import numpy as np
    import pandas as pd

    from benchmarks.learn_data import TABLES
    from benchmarks.learn_report import write

    rng = np.random.default_rng(0)
    gold = rng.uniform(0, 1, 200)
    pairs = pd.DataFrame({"sentence1": [f"a{i}" for i in range(200)], "sentence2": [f"b{i}" for i in range(200)],
                          "score": gold})

    def row(rnd, kind, noise, promoted, stage2_s=None):
        return {"round": rnd, "retrain": kind, "promoted": promoted, "stage2_s": stage2_s, "clock_s": 300.0,
                "steps": 100, "kept_step": 50, "precision": "fp32", "rows_added": 40,
                "cosines": (gold + rng.normal(0, noise, 200)).tolist()}

    rows = [row(1, "first", 0.5, True), row(2, "warm", 0.2, True, 60.0), row(2, "cold", 0.1, False, 240.0),
            row(3, "warm", 0.15, False, 50.0), row(3, "cold", 0.12, True, 250.0)]
    text = write(rows, pairs, {"warm": tmp_path / "warm", "cold": tmp_path / "cold"}, TABLES["qa"],
                 {"overrides": ["stage2.epochs=1"], "split": {"first": 0.4, "arrivals": 2}}, tmp_path / "learn")
    out = json.loads((tmp_path / "learn.json").read_text())
    by = {(r["round"], r["retrain"]): r for r in out["rows"]}
    assert all("cosines" not in r for r in out["rows"]) and out["fixed_pairs"] == out["unseen_pairs"] == 200
    assert by[(2, "warm")]["task_score"] > by[(1, "first")]["task_score"]  # less noise, higher Spearman
    assert by[(2, "warm")]["task_ci"][0] < by[(2, "warm")]["task_score"] < by[(2, "warm")]["task_ci"][1]
    # the champion served: warm promoted in round 2 and not in 3; cold kept v1 in round 2, promoted in 3
    assert by[(3, "warm")]["champion_score"] == by[(2, "warm")]["task_score"]
    assert by[(2, "cold")]["champion_score"] == by[(1, "first")]["task_score"]
    assert by[(3, "cold")]["champion_score"] == by[(3, "cold")]["task_score"]
    goal = out["goal"]
    assert goal["complete"] and goal["stage2_ratio"] == 0.2 and goal["fast_enough"]
    assert goal["warm_minus_cold"] == round(by[(3, "warm")]["task_score"] - by[(3, "cold")]["task_score"], 2)
    assert goal["warm_promoted_rounds"] == [2] and goal["cold_promoted_rounds"] == [3]
    assert (tmp_path / "learn.png").read_bytes()[:4] == b"\x89PNG" and "reports/learn.png" in text
    assert "`stage2.epochs=1`" in text and out["machine"]["precision"] == "fp32"
    assert "`task_replay: 2.0`" in text  # the settings a plain `stsreg data add` retrains with

    # the default configuration alone (make bench-learn --table sick --kinds warm): the curve's first and last
    warm_only = [r for r in rows if r["retrain"] != "cold"]
    text = write(warm_only, pairs, {"warm": tmp_path / "warm"}, TABLES["sick"],
                 {"overrides": [], "split": {"first": 0.4, "arrivals": 2}, "kinds": ["warm"]}, tmp_path / "sick")
    goal = json.loads((tmp_path / "sick.json").read_text())["goal"]
    assert not goal["complete"] and goal["rises"] and goal["warm_promoted_rounds"] == [2]
    assert "the default (warm) retrain on `sick`" in text and "(rose); promoted in rounds [2]" in text


def test_a_warm_rounds_rows_follow_the_arrival_on_a_large_table(tmp_path):
    """benchmarks.replay_scale (``make bench-replay``) on a 2,000-pair table: the round's rows grow with the arrival
    at params.yaml's replay per new row, and replaying every old task row (the old recipe) costs more."""
    import json

    from benchmarks.replay_scale import main

    assert main(["--pairs", "2000", "--arrivals", "100", "200", "--out", str(tmp_path / "replay")]) == 0
    rows = json.loads((tmp_path / "replay.json").read_text())["rows"]
    small, large = rows
    assert large["new_train_rows"] > small["new_train_rows"] > 0
    assert small["rows"] == small["new_train_rows"] + small["replayed_task"] + small["replayed_other"]
    assert small["replayed_task"] == round(2.0 * small["new_train_rows"])  # task_replay 2 per new row
    assert large["steps"] > small["steps"] and small["steps_every_task_row"] >= small["steps"]
    assert "follows the arrival" in (tmp_path / "replay.md").read_text()

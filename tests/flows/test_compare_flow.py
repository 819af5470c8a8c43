"""The comparison flow on a tiny model: base, CoSENT, contrastive and +Ours trained and evaluated on the same
data, the results table / paired tests / plot written, finished runs skipped on a rerun."""

import json

import pandas as pd
import yaml

from tests.conftest import REPO, tiny_eval_table, tiny_sts
from tests.helpers.nli import grouped_nli


def test_compare_flow_writes_table_tests_plot_and_resumes(harness, tiny_backbone, tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/mlflow/mlflow.db")
    monkeypatch.chdir(tmp_path)  # the stage-1 embedding cache goes to ./cache
    from pipelines.experiments.compare_flow import compare_flow
    from stsreg.infra import tracking

    raw = yaml.safe_load((REPO / "params.yaml").read_text())
    raw["model"].update(backbone=tiny_backbone, max_length=16)
    raw["stage1"].update(epochs=1)
    # production trains 3 epochs; the comparison's budget (compare.epochs) is 1 for every row
    raw["stage2"].update(batch_size=8, eval_every=100, checkpoint_every_s=3600, lr=1e-3, contrastive_min_label=4.0,
                         epochs=3)
    raw["evaluate"].update(max_length=16, n_resamples=100)
    raw["compare"].update(methods=["base", "contrast", "cosent", "cosine_mse", "ours"], seeds=[1], epochs=1)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    sts = tiny_eval_table(40)
    train = tiny_sts(64, seed=9).assign(dataset="stsb", split="train", subset="x", file="t", line=range(64),
                                        seen_in_train=False)
    pd.concat([sts, train], ignore_index=True).to_parquet(tmp_path / "sts.parquet")
    grouped_nli(14).to_parquet(tmp_path / "nli.parquet")  # triples for the default encoder step
    kw = dict(params_path=str(tmp_path / "params.yaml"), sts_path=str(tmp_path / "sts.parquet"),
              nli_path=str(tmp_path / "nli.parquet"), runs_dir=str(tmp_path / "runs"), out_dir=str(tmp_path / "out"),
              metrics_path=str(tmp_path / "compare.json"))

    summary = compare_flow(**kw)
    methods = ["base", "contrast", "cosent", "cosine_mse", "ours"]
    assert set(summary) == {f"{m}_{v}" for m in methods for v in ("avg7", "avg7_unseen")}
    results = pd.read_csv(tmp_path / "out/results.csv")
    assert list(results.method) == methods and (results.seeds == 1).all()
    # each trained row is what its method trained: the best dev evaluation after step 0, never the start
    trained = results.set_index("method").drop("base")
    assert (trained.kept_step > 0).all() and (trained.kept_step <= trained.total_steps).all()
    assert trained.loc["ours", "total_steps"] == 64 // 8  # one epoch of 64 pairs at batch 8: compare.epochs wins
    assert results.set_index("method").loc[["base"], "dev_kept"].isna().all()
    for m in methods[1:]:
        s = json.loads((tmp_path / f"out/rows/{m}-1/training_summary.json").read_text())
        assert s["kept"] == "trained" and s["trained_best_dev_spearman"] == trained.loc[m, "dev_kept"]
    assert (results.avg7_low <= results.avg7_mean).all() and (results.avg7_mean <= results.avg7_high).all()
    paired = pd.read_csv(tmp_path / "out/paired.csv")
    assert set(paired.other) == {"base", "contrast", "cosent", "cosine_mse"} and set(paired.view) == {"avg7",
                                                                                                      "avg7_unseen"}
    md = (tmp_path / "out/results.md").read_text()
    assert "| ours |" in md and "Paired bootstrap" in md and "| untrained |" in md and " -> " in md
    assert "Every trained row: 1 epoch(s) of stage 2, batch 8" in md
    assert (tmp_path / "out/avg7.png").stat().st_size > 1000
    assert not (tmp_path / "runs/ours-1").exists()  # weights are not kept; the results travel in out/rows
    c = tracking.client()
    exp = c.get_experiment_by_name("stsreg-compare")
    runs = c.search_runs([exp.experiment_id])
    assert sorted(r.info.run_name for r in runs) == ["base-1", "compare", "contrast-1", "cosent-1", "cosine_mse-1",
                                                     "ours-1"]
    # trained rows are trained models, not the untouched one (the old selection could hand back step 0 = base)
    by = results.set_index("method")
    for m in methods[1:]:
        assert abs(by.loc[m, "avg7_mean"] - by.loc["base", "avg7_mean"]) > 0.01, m

    # rerun: every (method, seed) is skipped (no new per-method MLflow runs), the report is rebuilt
    ids = {json.loads((tmp_path / f"out/rows/{m}-1/run.json").read_text())["mlflow_run_id"] for m in ("base", "ours")}
    compare_flow(**kw)
    assert {json.loads((tmp_path / f"out/rows/{m}-1/run.json").read_text())["mlflow_run_id"]
            for m in ("base", "ours")} == ids
    assert len(c.search_runs([exp.experiment_id])) == 7
    assert pd.read_csv(tmp_path / "out/paired.csv").equals(paired)  # the same tests, from the rows' files alone


def test_a_fresh_clone_trains_only_the_row_it_adds(harness, tiny_backbone, tmp_path, monkeypatch):
    """What travels in git (the tables and ``rows/``) is enough: with the work folder gone, as on a fresh clone, and
    a row added to the settings, only that row trains, and the claim pair (ours, mse) is tested against a row that
    was not retrained."""
    import shutil

    from tests.conftest import tiny_eval_table, tiny_sts

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/mlflow/mlflow.db")
    monkeypatch.chdir(tmp_path)
    from pipelines.experiments.compare_flow import compare_flow
    from stsreg.infra import tracking

    raw = yaml.safe_load((REPO / "params.yaml").read_text())
    raw["model"].update(backbone=tiny_backbone, max_length=16)
    raw["stage1"].update(epochs=1)
    raw["stage1"]["encoder"].update(objective="none")
    raw["stage2"].update(batch_size=8, eval_every=100, checkpoint_every_s=3600, lr=1e-3)
    raw["evaluate"].update(max_length=16, n_resamples=50)
    raw["compare"].update(methods=["base", "ours"], seeds=[1], epochs=1)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    train = tiny_sts(48, seed=9).assign(dataset="stsb", split="train", subset="x", file="t", line=range(48),
                                        seen_in_train=False)
    pd.concat([tiny_eval_table(40), train], ignore_index=True).to_parquet(tmp_path / "sts.parquet")
    grouped_nli(10).to_parquet(tmp_path / "nli.parquet")
    kw = dict(params_path=str(tmp_path / "params.yaml"), sts_path=str(tmp_path / "sts.parquet"),
              nli_path=str(tmp_path / "nli.parquet"), runs_dir=str(tmp_path / "runs"), out_dir=str(tmp_path / "out"),
              metrics_path=str(tmp_path / "compare.json"))
    first = compare_flow(**kw)
    rows = tmp_path / "out/rows"
    assert sorted(p.name for p in rows.iterdir() if p.is_dir()) == ["base-1", "ours-1"]
    assert len(list(rows.glob("pairs-*.parquet"))) == 1  # the pairs once, every row's scores beside them
    kept = {m: (rows / f"{m}-1/run.json").read_text() for m in ("base", "ours")}

    shutil.rmtree(tmp_path / "runs")  # a fresh clone: no stage-1 model, no work folder
    raw["compare"]["methods"] = ["base", "ours", "mse"]
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    second = compare_flow(**kw)
    exp = tracking.client().get_experiment_by_name("stsreg-compare")
    names = sorted(r.info.run_name for r in tracking.client().search_runs([exp.experiment_id]))
    assert names == ["base-1", "compare", "compare", "mse-1", "ours-1"]  # one row trained: mse
    assert {m: (rows / f"{m}-1/run.json").read_text() for m in ("base", "ours")} == kept
    assert {k: second[k] for k in first} == first
    paired = pd.read_csv(tmp_path / "out/paired.csv")
    assert {("ours", "mse"), ("ours", "base")} <= set(zip(paired.reference, paired.other))

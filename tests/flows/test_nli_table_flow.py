"""The NLI-table flow on a tiny model: rows trained and evaluated on the same data, the table with the paper's rows,
paired tests of Smooth K2 against every row, one MLflow run per row, finished rows skipped on a rerun."""

import json

import pandas as pd
import pytest
import yaml

from tests.conftest import REPO, tiny_eval_table
from tests.helpers.nli import grouped_nli


def test_nli_table_flow_writes_table_tests_and_resumes(harness, tiny_backbone, tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/mlflow/mlflow.db")
    import pipelines.experiments.nli_table_flow as flow
    from stsreg.experiments import nli_table
    from stsreg.infra import tracking

    objectives = ["base", "softmax", "smooth_k2", "triplet", "simcse_unsup"]
    raw = yaml.safe_load((REPO / "params.yaml").read_text())
    raw["model"].update(backbone=tiny_backbone, max_length=16)
    raw["evaluate"].update(max_length=16, n_resamples=100)
    raw["nli_table"].update(objectives=objectives, seeds=[1], max_pairs=16, batch_size=8, lr=1e-3)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    tiny_eval_table(40).to_parquet(tmp_path / "sts.parquet")
    grouped_nli(16).to_parquet(tmp_path / "nli.parquet")
    kw = dict(params_path=str(tmp_path / "params.yaml"), nli_path=str(tmp_path / "nli.parquet"),
              sts_path=str(tmp_path / "sts.parquet"), runs_dir=str(tmp_path / "runs"), out_dir=str(tmp_path / "out"),
              metrics_path=str(tmp_path / "nli_table.json"))

    summary = flow.nli_table_flow(**kw)
    assert set(summary) == {f"{o}_avg7" for o in objectives}
    results = pd.read_csv(tmp_path / "out/results.csv")
    assert list(results.method) == objectives
    # every trained row moved away from the backbone; each ran 2 steps (16 examples / batch 8) and kept no weights
    base = results.set_index("method").loc["base", "avg7_mean"]
    for o in objectives[1:]:
        s = json.loads((tmp_path / f"out/rows/{o}-1/nli_summary.json").read_text())
        assert s["steps"] == 2 and s["examples"] == 16
        assert results.set_index("method").loc[o, "avg7_mean"] != pytest.approx(base, abs=1e-9)
        assert not (tmp_path / f"runs/{o}-1").exists()  # the work goes; the results travel in out/rows
    paired = pd.read_csv(tmp_path / "out/paired.csv")
    assert set(paired.reference) == {"smooth_k2"} and set(paired.other) == set(objectives) - {"smooth_k2"}
    md = (tmp_path / "out/results.md").read_text()
    assert "BERT + Smooth K2 (ours: smooth_k2)" in md and "| triplet |" in md and "minutes" in md
    assert (tmp_path / "out/avg7.png").stat().st_size > 0

    runs = tracking.client().search_runs([tracking.client().get_experiment_by_name(flow.EXPERIMENT).experiment_id])
    by_name = {r.info.run_name: r for r in runs}
    assert {f"{o}-1" for o in objectives} | {"nli-table"} <= set(by_name)
    assert by_name["triplet-1"].data.params["nli_table.margin"] == "1.0"
    assert len(tracking.client().get_metric_history(by_name["triplet-1"].info.run_id, "train_loss")) == 2

    # rerun: nothing is trained again; a changed setting retrains only the rows it touches
    monkeypatch.setattr(nli_table, "run_row", lambda *a, **k: (_ for _ in ()).throw(AssertionError("retrained")))
    assert flow.nli_table_flow(**kw) == summary

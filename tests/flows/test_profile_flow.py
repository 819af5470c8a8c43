"""The profile flow on a tiny model: real subprocess measurements, the cost model predicting what is over
budget, the table / CSV / plot / metrics written, one MLflow run, the params it reads declared in dvc.yaml, and a
rerun reusing the finished measurements."""

import json

import pandas as pd

from stsreg.infra.config import load_params
from tests.conftest import REPO, replace_params
from tests.helpers.params import Recorder, declared


def test_profile_flow_measures_predicts_writes_and_resumes(harness, tiny_backbone, tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/mlflow/mlflow.db")
    import pipelines.experiments.profile_flow as pf
    from stsreg.infra import tracking

    params = replace_params(load_params(REPO / "params.yaml"), model={"backbone": tiny_backbone}, profile={
        "device": "cpu", "methods": ("regression_full", "contrastive"), "batch_sizes": (2, 4), "lengths": (8, 16),
        "headline_batch": 4, "headline_length": 32, "reference_batch": 8, "reference_length": 24,
        "max_step_s": 1e-9})  # after 3 measured points per method every other configuration is "too slow"
    seen: set = set()
    monkeypatch.setattr(pf, "load_params", lambda path: Recorder(params, seen))
    kw = dict(params_path="unused", out_dir=str(tmp_path / "out"), metrics_path=str(tmp_path / "profile.json"))

    summary = pf.profile_flow(**kw)
    assert seen == declared("profile")
    df = pd.read_csv(tmp_path / "out/profile.csv")
    assert len(df) == 10 and (df.status == "measured").sum() == 6 and (df.status == "predicted").sum() == 4
    assert df.predicted_mb.notna().all() and (df.shown_mb > 0).all()
    assert summary["headline_predicted"] == 1 and summary["reference_predicted"] == 1 and summary["memory_ratio"] > 0
    assert json.loads((tmp_path / "profile.json").read_text())["memory_ratio"] == summary["memory_ratio"]
    table = (tmp_path / "out/table.md").read_text()
    assert "| **contrastive** | 8 | 24 | predicted |" in table and "ratio to contrastive b8/len24" in table
    assert (tmp_path / "out/memory_vs_length.png").stat().st_size > 1000
    assert set(pd.read_csv(tmp_path / "out/plot.csv").columns) == {"series", "length", "peak_mb", "status"}
    c = tracking.client()
    runs = c.search_runs([c.get_experiment_by_name("stsreg-profile").experiment_id])
    assert len(runs) == 1 and runs[0].data.metrics["memory_ratio"] == summary["memory_ratio"]
    assert {a.path for a in c.list_artifacts(runs[0].info.run_id, "profile")} >= {"profile/table.md",
                                                                                  "profile/memory_vs_length.png"}

    # rerun: every measured configuration comes from reports/profile/points, no subprocess is started
    monkeypatch.setattr(pf, "measure_in_subprocess", lambda *a,
                        **k: (_ for _ in ()).throw(AssertionError("re-measured")))
    assert pf.profile_flow(**kw)["memory_ratio"] == summary["memory_ratio"]


def test_unknown_profile_method_is_a_clear_error(harness, tmp_path, capsys):
    import stsreg.cli

    (tmp_path / "params.yaml").write_text("profile:\n  methods: [regression_full, simclr]\n")
    code = stsreg.cli.main(["profile", "--params", str(tmp_path / "params.yaml"), "--out", str(tmp_path / "out"),
                            "--metrics", str(tmp_path / "m.json")])
    assert code == 2 and "params.yaml: profile.methods[1]: expected one of" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()  # nothing measured, nothing written

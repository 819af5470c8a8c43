"""Training flows end to end on a tiny model: Prefect (test harness) + a real MLflow SQLite store."""


import json

import pandas as pd
import pytest
import yaml

from tests.conftest import REPO, tiny_sts
from tests.helpers.nli import grouped_nli


def test_stage1_then_stage2_tracked_in_mlflow(harness, tiny_backbone, tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/mlflow/mlflow.db")
    from pipelines.product.stage1_flow import stage1_flow
    from pipelines.product.stage2_flow import stage2_flow
    from stsreg.infra import tracking

    raw = yaml.safe_load((REPO / "params.yaml").read_text())
    raw["model"].update(backbone=tiny_backbone, max_length=16)
    raw["stage2"].update(batch_size=8, eval_every=5, checkpoint_every_s=0, epochs=1)  # the counts below are per epoch
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    grouped_nli(20).to_parquet(tmp_path / "nli.parquet")  # triples for the default encoder step
    monkeypatch.chdir(tmp_path)  # the encoder step's checkpoints go to ./checkpoints/stage1
    pd.concat([tiny_sts(48).assign(dataset="stsb", split="train"),
               tiny_sts(16, 1).assign(dataset="stsb", split="dev")]).to_parquet(tmp_path / "sts.parquet")

    s1 = stage1_flow(params_path=str(tmp_path / "params.yaml"), nli_path=str(tmp_path / "nli.parquet"),
                     out_dir=str(tmp_path / "m1"), cache_dir=str(tmp_path / "cache"))
    s2 = stage2_flow(params_path=str(tmp_path / "params.yaml"), sts_path=str(tmp_path / "sts.parquet"),
                     init_dir=str(tmp_path / "m1"), out_dir=str(tmp_path / "m2"), ckpt_dir=str(tmp_path / "ck"),
                     metrics_path=str(tmp_path / "stage2.json"), curves_dir=str(tmp_path / "curves"))
    c = tracking.client()
    r1, r2 = c.get_run(s1["run_id"]), c.get_run(s2["run_id"])
    assert r1.info.status == r2.info.status == "FINISHED"
    assert r1.data.params["stage1.x0"] == "0.25" and r2.data.params["stage2.k"] == "3.0"
    assert r2.data.tags["torch"].startswith("2.13.0") and r2.data.tags["device"] == "cpu"
    assert "data_sha256.sts.parquet" in r2.data.tags and "git_commit" in r2.data.tags
    losses = c.get_metric_history(s2["run_id"], "train_loss")
    assert [m.step for m in losses] == list(range(1, 7))          # per-step loss: 48 pairs / batch 8
    curve = c.get_metric_history(s2["run_id"], "dev_spearman")
    assert [m.step for m in curve] == [0, 5, 6]                   # before, every 5 steps, epoch end
    assert r2.data.metrics["best_dev_spearman"] == max(m.value for m in curve)
    # the headline file (dvc metrics) and the dev curve (dvc plots) agree with the run
    headline = json.loads((tmp_path / "stage2.json").read_text())
    assert set(headline) == {"steps", "start_dev_spearman", "best_dev_spearman", "best_step",
                             "trained_best_dev_spearman",
                             "trained_best_step"} and headline["steps"] == 6
    assert headline["best_dev_spearman"] == r2.data.metrics["best_dev_spearman"]
    plotted = pd.read_csv(tmp_path / "curves" / "dev_curve.csv")
    assert plotted.step.tolist() == [0, 5, 6] and plotted.dev_spearman.tolist() == pytest.approx(
        [m.value for m in curve]
    )
    # the loss curve: one point per 25-step window; a run of 6 steps has one, the mean of the 6 logged losses
    loss_curve = pd.read_csv(tmp_path / "curves" / "loss_curve.csv")
    assert loss_curve.step.tolist() == [6]
    assert loss_curve.train_loss.tolist() == pytest.approx([sum(m.value for m in losses) / 6], rel=1e-5)
    artifacts = {a.path for a in c.list_artifacts(s2["run_id"], "model")}
    assert "model/head.safetensors" in artifacts and "model/model.safetensors" in artifacts
    assert (tmp_path / "mlflow/artifacts").is_dir()

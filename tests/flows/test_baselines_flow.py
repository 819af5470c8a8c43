"""The baselines flow on tiny data: systems trained on STS-B train and selected on dev, the table with the study's
figures, the unavailable word2vec row, the retrieval cost, one MLflow child run per system under one parent, and
finished systems skipped on a rerun."""

import json

import pandas as pd
import yaml

from tests.conftest import REPO, tiny_eval_table, tiny_sts
from tests.helpers.nli import grouped_nli


def test_baselines_flow_writes_table_runs_and_resumes(harness, tiny_backbone, tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/mlflow/mlflow.db")
    import pipelines.experiments.baselines_flow as flow
    from stsreg.infra import tracking
    from stsreg.experiments.baselines import experiment, retrieval

    systems = ["word2vec_pretrained", "word2vec_cbow", "gru", "sbert", "cross_mlp"]
    raw = yaml.safe_load((REPO / "params.yaml").read_text())
    raw["evaluate"].update(n_resamples=100)
    raw["baselines"].update(systems=systems, backbone=tiny_backbone, max_length=16, word_epochs=2, word_min_count=1,
                            rnn_epochs=2, rnn_hidden=8, rnn_dim=8, epochs=2, batch_size=8, lr=1e-3, eval_every=2,
                            retrieval_candidates=20)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    train = tiny_sts(24, seed=7).assign(dataset="stsb", split="train", subset="", file="stsb/train.csv",
                                        line=range(1, 25), seen_in_train=False)
    pd.concat([tiny_eval_table(30), train], ignore_index=True).to_parquet(tmp_path / "sts.parquet")
    grouped_nli(8).to_parquet(tmp_path / "nli.parquet")
    kw = dict(params_path=str(tmp_path / "params.yaml"), sts_path=str(tmp_path / "sts.parquet"),
              nli_path=str(tmp_path / "nli.parquet"), runs_dir=str(tmp_path / "runs"), out_dir=str(tmp_path / "out"),
              metrics_path=str(tmp_path / "baselines.json"), compare_results=str(tmp_path / "no-compare.csv"))

    summary = flow.baselines_flow(**kw)
    ran = systems[1:]
    assert set(summary) == {f"{s}_stsb_spearman" for s in ran}
    results = pd.read_csv(tmp_path / "out/results.csv").set_index("system")
    assert list(results.index) == ran
    # trained systems: 24 pairs / batch 8 = 3 steps an epoch; dev evaluated at 0, 2, 3, 4, 6; the kept one after 0
    for s in ("sbert", "cross_mlp"):
        fit = json.loads((tmp_path / f"out/rows/{s}/fit_summary.json").read_text())
        assert fit["steps"] == 6 and [h["step"] for h in fit["history"]] == [0, 2, 3, 4, 6]
        assert fit["kept_step"] > 0 and fit["kept_dev_spearman"] == max(h["dev_spearman"] for h in fit["history"][1:])
        assert not (tmp_path / f"runs/{s}/checkpoint.pt").exists()
    assert pd.isna(results.loc["word2vec_cbow", "dev_kept"]) and results.loc["word2vec_cbow",
                                                                             "trainable_parameters"] == 0
    assert results.loc["cross_mlp", "family"] == "cross-encoder"
    for s in ran:
        r = results.loc[s]
        assert r.stsb_spearman_low <= r.stsb_spearman <= r.stsb_spearman_high
        assert r.stsb_pearson_low <= r.stsb_pearson <= r.stsb_pearson_high
    md = (tmp_path / "out/results.md").read_text()
    assert "| word2vec_pretrained | word vectors | not run: no word2vec file" in md
    assert "| 86.8 |" in md  # S-BERT's study figure (0.868) beside ours
    assert "pairs/s" in md and (tmp_path / "out/stsb.png").stat().st_size > 0
    cost = json.loads((tmp_path / "out/rows/retrieval.json").read_text())
    assert cost["candidates"] == 20 and cost["cross_pairs_per_s"] > 0 and cost["bi_pairs_per_s"] > 0
    # keyed on the code it measures with and the precision "auto" resolved to, so make recommit can re-key it
    assert cost["code"] == list(flow.RETRIEVAL_CODE) and cost["parts"]["precision"] in ("fp32", "bf16")

    c = tracking.client()
    runs = c.search_runs([c.get_experiment_by_name(flow.EXPERIMENT).experiment_id])
    by_name = {r.info.run_name: r for r in runs}
    parent = by_name["baselines"].info.run_id
    assert set(systems) <= set(by_name)
    assert all(by_name[s].data.tags["mlflow.parentRunId"] == parent for s in systems)
    assert "no word2vec file" in by_name["word2vec_pretrained"].data.tags["unavailable"]
    assert len(c.get_metric_history(by_name["sbert"].info.run_id, "dev_spearman")) == 5

    # rerun: nothing is trained or measured again
    run_system = experiment.run_system
    monkeypatch.setattr(experiment, "run_system", lambda *a, **k: (_ for _ in ()).throw(AssertionError("retrained")))
    monkeypatch.setattr(retrieval, "retrieval_cost", lambda *a,
                        **k: (_ for _ in ()).throw(AssertionError("remeasured")))
    assert flow.baselines_flow(**kw) == summary

    # a setting only the recurrent systems read reruns those alone (here: gru)
    retrained = []
    monkeypatch.setattr(experiment, "run_system", lambda params, name, *a, **k: retrained.append(name)
                        or run_system(params, name, *a, **k))
    raw["baselines"]["rnn_epochs"] = 1
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    again = flow.baselines_flow(**kw)
    assert retrained == ["gru"]
    assert {k: v for k, v in again.items() if not k.startswith("gru")} == \
        {k: v for k, v in summary.items() if not k.startswith("gru")}
    assert json.loads((tmp_path / "out/rows/gru/fit_summary.json").read_text())["params"]["rnn_epochs"] == 1

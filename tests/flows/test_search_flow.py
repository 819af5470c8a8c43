"""The stage-2 search flow on a tiny model: trials scored on STS-B dev only, a report, MLflow child runs under
one parent, a study that resumes (and retries a trial left running by a killed process), and test rows that
cannot influence any trial."""

import json

import pandas as pd
import yaml

from tests.conftest import REPO, tiny_eval_table, tiny_sts


def _setup(tmp_path, tiny_backbone, sts: pd.DataFrame, name: str, trials: int = 3) -> dict:
    from stsreg.product.model import SiameseRegressor

    raw = yaml.safe_load((REPO / "params.yaml").read_text())
    raw["model"].update(backbone=tiny_backbone, max_length=16)
    raw["stage2"].update(batch_size=8, checkpoint_every_s=3600, eval_batch_size=32)
    raw["search"].update(trials=trials, minutes=30, epochs=[1], lr=[1e-4, 3e-3], eval_every=4, startup_trials=1,
                         prune_after=1, losses=["smooth_k2", "smooth_k2_cos", "joint_smooth_k2", "cosine_mse"],
                         enqueue=[{"loss": "joint_smooth_k2", "lr": 1e-3, "warmup_ratio": 0.1, "joint_lambda": 0.5}])
    root = tmp_path / name
    root.mkdir()
    (root / "params.yaml").write_text(yaml.safe_dump(raw))
    sts.to_parquet(root / "sts.parquet")
    init = tmp_path / "init"
    if not init.exists():
        SiameseRegressor.from_pretrained(tiny_backbone, max_length=16).save(init)
    return dict(params_path=str(root / "params.yaml"), sts_path=str(root / "sts.parquet"), init_dir=str(init),
                work_dir=str(root / "work"), db_path=str(root / "study.db"), out_dir=str(root / "out"),
                metrics_path=str(root / "search.json"))


def _table(seed_shift: int = 0) -> pd.DataFrame:
    evals = tiny_eval_table(30)
    train = tiny_sts(48, seed=9).assign(dataset="stsb", split="train", subset="x", file="t", line=range(48),
                                        seen_in_train=False)
    return pd.concat([evals, train], ignore_index=True)


def test_search_flow_reports_resumes_and_tracks_trials(harness, tiny_backbone, tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/mlflow/mlflow.db")
    import optuna

    from pipelines.experiments.search_flow import run_study, search_flow
    from stsreg.infra import tracking

    kw = _setup(tmp_path, tiny_backbone, _table(), "a")
    summary = search_flow(**kw)
    assert summary["trials"] == 3 and summary["complete"] + summary["pruned"] == 3 and summary["complete"] >= 1
    trials = pd.read_csv(f"{kw['out_dir']}/trials.csv")
    assert len(trials) == 3 and trials.dev_spearman.notna().sum() >= 1
    best = json.loads((tmp_path / "a/out/best.json").read_text())
    assert best["dev_spearman"] == summary["best_dev_spearman"] == trials.dev_spearman.max()
    assert best["stage2"]["loss"] in ("smooth_k2", "smooth_k2_cos", "joint_smooth_k2", "cosine_mse")
    # loss-specific knobs appear only for the losses that read them
    for _, r in trials.iterrows():
        assert pd.isna(r.k) == (r.loss == "cosine_mse") and pd.isna(r.joint_lambda) == (r.loss != "joint_smooth_k2")
    md = (tmp_path / "a/out/results.md").read_text()
    assert "**Best: trial" in md and "test rows are never read" in md
    assert (tmp_path / "a/out/dev_by_trial.png").stat().st_size > 1000
    assert not any((tmp_path / "a/work").glob("*/model"))  # trials keep curves, not weights

    c = tracking.client()
    exp = c.get_experiment_by_name("stsreg-search")
    runs = c.search_runs([exp.experiment_id])
    parents = [r for r in runs if r.info.run_name == "search"]
    children = [r for r in runs if r.info.run_name.startswith("trial-")]
    assert len(parents) == 1 and len(children) == 3
    assert all(r.data.tags["mlflow.parentRunId"] == parents[0].info.run_id for r in children)
    assert all(r.data.tags["state"] in ("complete", "pruned") for r in children)
    assert all("dev_spearman" in r.data.metrics for r in children)

    # a rerun with the same inputs continues the study: it already holds search.trials trials, so none is added
    name = run_study.fn(kw["params_path"], kw["sts_path"], kw["init_dir"], kw["work_dir"], kw["db_path"])
    study = optuna.load_study(study_name=name, storage=f"sqlite:///{kw['db_path']}")
    assert len(study.trials) == 3
    # the enqueued point ran first, exactly once, with only the knobs its loss reads
    assert study.trials[0].user_attrs["enqueued"] and study.trials[0].params == {
        "loss": "joint_smooth_k2", "epochs": 1, "lr": 1e-3, "warmup_ratio": 0.1, "labels": "raw",
        "group_by_length": False, "x0": 0.2, "k": 3.0, "joint_lambda": 0.5}
    assert sum(t.user_attrs.get("enqueued", False) for t in study.trials) == 1

    # a trial left RUNNING (its process was killed) is marked failed and its settings run again
    from stsreg.experiments import search
    from stsreg.infra.config import load_params

    study.enqueue_trial({"loss": "cosine_mse", "epochs": 1, "lr": 1e-3, "warmup_ratio": 0.1, "labels": "raw",
                         "group_by_length": False})
    params = load_params(kw["params_path"])
    search.suggest(study.ask(), params.search, params.stage2)  # started, never told: what a kill leaves behind
    raw = yaml.safe_load(open(kw["params_path"]))
    raw["search"]["trials"] = 4  # a larger budget continues the same study (the budget is not part of its name)
    open(kw["params_path"], "w").write(yaml.safe_dump(raw))
    assert run_study.fn(kw["params_path"], kw["sts_path"], kw["init_dir"], kw["work_dir"], kw["db_path"]) == name
    study = optuna.load_study(study_name=name, storage=f"sqlite:///{kw['db_path']}")
    states = [s.state.name for s in study.trials]
    assert len(states) == 5 and states[3] == "FAIL" and study.trials[4].user_attrs["retry_of"] == 3
    assert study.trials[4].params["loss"] == "cosine_mse" and states[4] in ("COMPLETE", "PRUNED")


def test_test_rows_cannot_influence_the_search(harness, tiny_backbone, tmp_path, monkeypatch):
    """Same study on two tables that differ only in their test rows (labels reversed, sentences swapped):
    every trial's dev curve is identical, so no test figure can steer a choice."""
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/mlflow/mlflow.db")
    from pipelines.experiments.search_flow import search_flow

    table = _table()
    poisoned = table.copy()
    test = poisoned.split == "test"
    poisoned.loc[test, "score"] = 5.0 - poisoned.loc[test, "score"]
    poisoned.loc[test, ["sentence1", "sentence2"]] = poisoned.loc[test, ["sentence2", "sentence1"]].to_numpy()
    a = search_flow(**_setup(tmp_path, tiny_backbone, table, "clean", trials=2))
    b = search_flow(**_setup(tmp_path, tiny_backbone, poisoned, "poisoned", trials=2))
    ta = pd.read_csv(tmp_path / "clean/out/trials.csv")
    tb = pd.read_csv(tmp_path / "poisoned/out/trials.csv")
    assert a["best_dev_spearman"] == b["best_dev_spearman"]
    pd.testing.assert_frame_equal(ta.drop(columns="minutes"), tb.drop(columns="minutes"))


def test_a_continued_study_draws_new_start_up_points(tmp_path):
    """The sampler is seeded by how many trials the study holds: a second invocation must not replay the first
    one's start-up draws (it did when every invocation seeded TPE with the same number)."""
    import dataclasses

    from pipelines.experiments.search_flow import _open_study
    from stsreg.infra.config import Params

    s = dataclasses.replace(Params().search, enqueue=())

    def invocation(n: int) -> list[float]:
        study = _open_study("continued", str(tmp_path / "study.db"), s, seed=42)
        drawn = []
        for _ in range(n):
            trial = study.ask()
            drawn.append(trial.suggest_float("lr", 1e-5, 1e-4, log=True))
            study.tell(trial, drawn[-1])
        return drawn

    first, second = invocation(3), invocation(3)
    assert len(set(first)) == 3 and not set(first) & set(second)

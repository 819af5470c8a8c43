"""`stsreg search --backbone NAME` as the docs print it: the stage-2 search on another backbone, from the stage-1 model
of that backbone's comparison (trained by the search when missing, then reused by the comparison), scored on dev only,
into its own folder; a rerun continues the study without new trials; the declared points are the comparison's row."""

import dataclasses
import json

import pandas as pd
import yaml

from tests.conftest import REPO, TINY_WORDS, tiny_eval_table, tiny_sts
from tests.helpers.backbones import tiny_backbone_of
from tests.helpers.nli import grouped_nli


def _project(tmp_path, backbone: str) -> None:
    raw = yaml.safe_load((REPO / "params.yaml").read_text())
    raw["model"].update(max_length=16)
    raw["stage1"].update(epochs=1)
    raw["stage2"].update(batch_size=8, eval_every=100, checkpoint_every_s=3600, lr=1e-3)
    raw["evaluate"].update(max_length=16, n_resamples=50)
    raw["search"].update(eval_every=3, losses=["smooth_k2_cos"], lr=[1e-4, 1e-3], startup_trials=5,
                         enqueue=[{"loss": "smooth_k2_cos", "lr": 1e-3, "x0": 0.0}])
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    (tmp_path / "data/prepared").mkdir(parents=True)
    train = tiny_sts(48, seed=9).assign(dataset="stsb", split="train", subset="x", file="t", line=range(48),
                                        seen_in_train=False)
    pd.concat([tiny_eval_table(24), train], ignore_index=True).to_parquet(tmp_path / "data/prepared/sts.parquet")
    grouped_nli(14).to_parquet(tmp_path / "data/prepared/nli_train.parquet")


def test_the_search_on_another_backbone_starts_from_its_comparisons_stage1(harness, tmp_path, monkeypatch):
    from stsreg.cli import main
    from stsreg.experiments import backbone_search

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/mlflow/mlflow.db")
    monkeypatch.chdir(tmp_path)
    backbone = tiny_backbone_of("mpnet", tmp_path / "tiny-mpnet", list(TINY_WORDS))
    _project(tmp_path, backbone)

    argv = ["search", "--backbone", backbone, "--set", "search.trials=2"]
    assert main(argv) == 0  # no models/stage1 in this project: the backbone's own stage 1 is the start
    out = tmp_path / "reports/search_backbones/tiny-mpnet"
    assert backbone_search.folder(backbone) == out.relative_to(tmp_path)
    stage1 = list((tmp_path / "reports/compare_backbones/tiny-mpnet/runs").glob("_stage1-*"))
    models = [p for p in stage1 if not p.name.endswith("-checkpoints")]
    assert len(models) == 1 and models[0].name.startswith("_stage1-42-")
    trials = pd.read_csv(out / "trials.csv")
    assert len(trials) == 2 and trials.state.eq("COMPLETE").all() and trials.x0.iloc[0] == 0.0
    report = (out / "results.md").read_text()
    assert report.startswith(f"Backbone: {backbone}.") and "models/stage1" not in report and "_stage1-42-" in report
    ran = yaml.safe_load((out / "params.yaml").read_text())
    assert ran["model"]["backbone"] == backbone and ran["search"]["trials"] == 2
    assert json.loads((out / "metrics.json").read_text())["complete"] == 2
    assert not (tmp_path / "reports/search").exists()  # the product's search is not touched

    assert main(argv) == 0  # continued: the study holds its two trials, none is run again
    assert pd.read_csv(out / "trials.csv").minutes.tolist() == trials.minutes.tolist()

    # a fixed setting changed is its own study in its own folder (as docs/backbones.md runs the cosine map), from the
    # same stage-1 model (stage 2's settings are not in its key), and the declared study is left as it was
    other = tmp_path / "reports/search_backbones/tiny-mpnet-cos-7.5"
    assert main(["search", "--backbone", backbone, "--set", "stage2.cos_a=7.5", "--set", "stage2.cos_b=-2.5",
                 "--set", "search.trials=1", "--out", str(other.relative_to(tmp_path))]) == 0
    assert len(list((tmp_path / "reports/compare_backbones/tiny-mpnet/runs").glob("_stage1-*"))) == len(stage1)
    ran_other = yaml.safe_load((other / "params.yaml").read_text())["stage2"]
    assert (ran_other["cos_a"], ran_other["cos_b"]) == (7.5, -2.5)
    assert len(pd.read_csv(other / "trials.csv")) == 1
    assert pd.read_csv(out / "trials.csv").minutes.tolist() == trials.minutes.tolist()

    # the comparison on the same backbone takes that stage-1 model as its own (trains no second one)
    summary = models[0] / "training_summary.json"
    before = summary.stat().st_mtime_ns
    assert main(["compare", "--backbone", backbone, "--set", "compare.methods=[ours]", "--set",
                 "compare.seeds=[42]"]) == 0
    assert len(list((tmp_path / "reports/compare_backbones/tiny-mpnet/runs").glob("_stage1-*"))) == len(stage1)
    assert summary.stat().st_mtime_ns == before

    # a bad --set is refused before anything is written
    assert main(["search", "--backbone", backbone, "--set", "search.trials", "--out", "elsewhere"]) == 2
    assert not (tmp_path / "elsewhere").exists()


def test_the_declared_points_are_the_comparisons_cosine_row_with_one_value_changed():
    """Each point of all-mpnet-base-v2's search is its comparison's ours_cos row (stage 2 as that row trains it), with
    x0 alone changed, and dev is evaluated at the row's steps: the dev curves read against each other."""
    from stsreg.experiments import backbone_search, compare
    from stsreg.infra.config import load_params

    p = backbone_search.resolved(load_params(REPO / "params.yaml"), "all-mpnet-base-v2", {})
    row = compare.stage2_for(p, "ours_cos")
    assert p.search.eval_every == row.eval_every and p.search.trials == 2
    for point in p.search.enqueue:
        for field, value in dataclasses.asdict(point).items():
            if field not in ("x0", "joint_lambda"):  # joint_lambda: read by joint_* losses only
                assert getattr(row, field) == value, field
    assert [pt.x0 for pt in p.search.enqueue] == [0.0, 0.4, row.x0]

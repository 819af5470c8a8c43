"""The Prefect data flow on the fixture tree, through Prefect's test harness (a real temporary server)."""

import json


from pipelines.product.data_flow import data_flow, prepare_task
from tests.conftest import FIXTURE_RAW, fixture_registry, fixture_sources


def test_flow_runs_fetch_then_prepare(harness, tmp_path, own_project):
    (tmp_path / "sources.json").write_text(json.dumps(fixture_sources()))
    (tmp_path / "params.yaml").write_text("prepare:\n  max_rejected_fraction: 1.0\n  nli_train: [snli/dev]\n")
    out = data_flow(params_path=str(tmp_path / "params.yaml"), registry=str(tmp_path / "sources.json"),
                    mirror=str(FIXTURE_RAW), raw_dir=str(tmp_path / "raw"), prepared_dir=str(tmp_path / "prepared"),
                    rejected_dir=str(tmp_path / "rejected"), metrics_path=str(tmp_path / "data.json"))
    summary = json.loads((tmp_path / "prepared/summary.json").read_text())
    assert summary["datasets"]["stsb"]["rejected"] == 5 and summary["nli_train_rows"] == 2
    headline = json.loads(open(out).read())  # what `dvc metrics show` prints: a few flat numbers
    assert headline == {"rows_kept": sum(d["kept"] for d in summary["datasets"].values()), "rows_rejected": 8,
                        "nli_train_rows": 2, "test_pairs_seen_in_train": headline["test_pairs_seen_in_train"],
                        "train_rows_removed_for_leakage": 0}
    assert (tmp_path / "raw/STS16/STS2016.input.headlines.txt").exists()
    # the run's wall time is recorded in the project it ran in, beside the outputs (not in summary.json)
    assert "wall_seconds" not in summary and (own_project / ".stsreg/runs/prepare.json").is_file()


def test_task_callable_bare(tmp_path, own_project):
    """Tasks stay plain functions: `.fn` runs without any Prefect server."""
    (tmp_path / "params.yaml").write_text("prepare:\n  max_rejected_fraction: 1.0\n  nli_train: []\n")
    path = prepare_task.fn(str(tmp_path / "params.yaml"), str(fixture_registry(tmp_path / "sources.json")),
                           str(FIXTURE_RAW), str(tmp_path / "p"), str(tmp_path / "r"),
                           str(tmp_path / "m.json"))
    assert json.loads(open(path).read())["nli_train_rows"] == 0

"""A project folder copied or moved keeps its MLflow store working where it now is: the embedded store's artifact
locations named the old folder (new runs wrote there, old artifacts were read from there); the first client of the
store rewrites them to its own folder."""

import shutil

from stsreg.infra import tracking


def test_a_moved_projects_store_writes_and_reads_in_its_new_folder(tmp_path):
    old, new = tmp_path / "old" / "project", tmp_path / "moved" / "project"
    uri_old = f"sqlite:///{old / 'mlflow/mlflow.db'}"
    c = tracking.client(uri_old)
    exp = tracking.experiment_id(c, "stsreg")
    run = c.create_run(exp)
    (tmp_path / "report.txt").write_text("the first run's report")
    c.log_artifact(run.info.run_id, str(tmp_path / "report.txt"))
    c.create_registered_model("m")
    c.create_model_version("m", f"runs:/{run.info.run_id}/report.txt", run_id=run.info.run_id)
    c.set_terminated(run.info.run_id)

    new.parent.mkdir(parents=True)
    shutil.move(str(old), str(new))  # the folder moved: nothing is left where the store was made
    c = tracking.client(f"sqlite:///{new / 'mlflow/mlflow.db'}")
    artifacts = (new / "mlflow/artifacts").as_uri()
    assert c.get_experiment(exp).artifact_location == artifacts
    got = c.download_artifacts(run.info.run_id, "report.txt", str(tmp_path))
    assert open(got).read() == "the first run's report"
    source = c.get_model_version("m", "1").source  # the registered version reads through its run
    assert source == f"runs:/{run.info.run_id}/report.txt"
    second = c.create_run(exp)
    assert second.info.artifact_uri.startswith(artifacts)
    assert not old.exists()  # and nothing was written where the project used to be
    assert tracking.relocate_store(new / "mlflow/mlflow.db") == []  # in place now: nothing to move

"""A tiny copy of the project for tests that run the real DVC pipeline: its dvc.yaml, code and params, the fixture
tree as its data mirror, a tiny backbone."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import yaml

from tests.conftest import FIXTURE_RAW, REPO, fixture_sources


def tiny_project(root: Path, backbone: str, git: bool = False) -> Path:
    """A copy of the project (pipeline, params, code paths DVC tracks) whose data is the fixture tree; with ``git``, a
    git repository with everything committed (what a clone of the real project is), else a DVC project without git."""
    project = root / "project"
    project.mkdir(parents=True)
    for name in ("dvc.yaml", "champion.json", "src", "pipelines"):
        (shutil.copytree(REPO / name, project / name, ignore=shutil.ignore_patterns("__pycache__"))
         if (REPO / name).is_dir() else shutil.copy(REPO / name, project / name))
    (project / "data").mkdir()
    (project / "data/sources.json").write_text(json.dumps(fixture_sources()))
    shutil.copytree(REPO / "data/tables", project / "data/tables")  # prepare's input folder for declared tables
    raw = yaml.safe_load((REPO / "params.yaml").read_text())
    raw["fetch"].update(mirror=str(FIXTURE_RAW), allow_download=False)
    raw["prepare"].update(max_rejected_fraction=1.0, nli_train=["snli/dev", "snli/test", "snli_cad/train",
                                                                "mnli/dev_matched"])
    raw["model"].update(backbone=backbone, max_length=16)
    raw["stage1"].update(epochs=1)
    # the fixture's few NLI rows hold no (premise, entailment, contradiction) triple for the default SimCSE encoder
    # step (refused with that reason): this test is about servers and deployments, so stage 1 trains the head only
    raw["stage1"]["encoder"].update(objective="none")
    raw["stage2"].update(batch_size=4, eval_every=100, checkpoint_every_s=3600)
    raw["evaluate"].update(max_length=16, n_resamples=50)
    raw["promote"].update(against_backbone=False)  # a random tiny encoder on the fixture beats nothing significantly
    (project / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    if not git:
        subprocess.run(["dvc", "init", "--no-scm", "-q"], cwd=project, check=True)
        return project
    (project / ".gitignore").write_text(
        "__pycache__/\n/mlflow/\n/.stsreg/\n/checkpoints/\n/cache/\n/reports/retrain/\n"
    )
    env = {**os.environ, **GIT_IDENTITY}
    for cmd in (["git", "init", "-q", "-b", "main"], ["dvc", "init", "-q"], ["git", "add", "-A"],
                ["git", "commit", "-q", "-m", "tiny project"]):
        subprocess.run(cmd, cwd=project, check=True, env=env)
    return project


#: Who commits in a test repository (a CI machine may have no git identity).
GIT_IDENTITY = {"GIT_AUTHOR_NAME": "stsreg tests", "GIT_AUTHOR_EMAIL": "tests@stsreg.invalid",
                "GIT_COMMITTER_NAME": "stsreg tests", "GIT_COMMITTER_EMAIL": "tests@stsreg.invalid"}


def scored_reviews(n: int, seed: int):
    """``n`` tiny scored pairs as a user's table: columns left, right, stars (a 1-5 scale)."""
    import pandas as pd

    from tests.conftest import tiny_sts

    t = tiny_sts(n, seed)
    return pd.DataFrame({"left": t.sentence1, "right": t.sentence2, "stars": t.score / 5 * 4 + 1})


def declare_reviews(project: Path, gate: list[str] | None = None) -> Path:
    """A git :func:`tiny_project` with a declared table of its own, ``reviews`` (200 pairs in
    ``data/tables/reviews.csv``), trained on beside STS-B and SICK-R and selecting on its dev split; ``gate``: the
    promotion's metrics (default: the project's). Committed; returns the project."""
    scored_reviews(200, 0).to_csv(project / "data/tables/reviews.csv", index=False)
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["prepare"]["sts_tables"] += [{"name": "reviews", "file": "data/tables/reviews.csv", "scale": [1, 5], "d": 1,
                                        "columns": {"sentence1": "left", "sentence2": "right", "score": "stars"}}]
    params["stage2"].update(train_tables=["stsb", "sickr", "reviews"], dev_table="reviews")
    if gate:
        params["promote"]["metrics"] = gate
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    env = {**os.environ, **GIT_IDENTITY}
    subprocess.run(["git", "add", "-A"], cwd=project, check=True, env=env)
    subprocess.run(["git", "commit", "-qm", "a declared table"], cwd=project, check=True, env=env)
    return project

"""`stsreg register` with a model but no evaluation of it: one line naming what is missing and what to run, no
traceback, nothing registered."""

from __future__ import annotations

import json
import shutil

import pytest

from stsreg.infra.errors import InputError
from tests.conftest import REPO


@pytest.mark.parametrize("present", [(), ("metrics.json",)])
def test_register_without_an_evaluation_says_what_to_run(tmp_path, present):
    from pipelines.product.release_flow import register_task

    shutil.copy(REPO / "params.yaml", tmp_path / "params.yaml")
    (tmp_path / "models/stage2").mkdir(parents=True)
    (tmp_path / "eval").mkdir()
    for name in present:
        (tmp_path / "eval" / name).write_text(json.dumps({"avg7_spearman": 80.0}))
    with pytest.raises(InputError, match=r"no evaluation in .*eval to register it with \(no mlflow_run.json.*\): run "
                                         r"`stsreg evaluate` \(or `dvc repro evaluate`\) first"):
        register_task.fn(str(tmp_path / "params.yaml"), str(tmp_path / "models/stage2"), str(tmp_path / "eval"), [],
                         str(tmp_path / "challenger.json"))
    assert not (tmp_path / "challenger.json").exists()

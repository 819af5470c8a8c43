"""The champion a warm stage 2 continues is a DVC input (``champion.json``), on a tiny git copy of the project driven by
the commands a user types, with no MLflow or Prefect variable set:

- a fresh project's ``dvc repro promote`` starts stage 2 from stage 1 and says "no champion" (what the committed pin
  says); ``dvc status`` is clean after it;
- ``stsreg data add`` pins the champion it made, and ``dvc status`` names ``champion.json`` beside the table;
- the next by-hand ``dvc repro promote`` starts warm from that champion with nothing set;
- with the champion moved by hand (``stsreg champion set``: the pin follows, ``dvc status`` says so), the commit's pin
  put back reproduces the warm stage 2 from the pinned version bit for bit, not from the alias;
- the retrain flow leaves the pin alone when the champion is its own last stage 2 (nothing new to continue).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml

from tests.helpers.project import GIT_IDENTITY, declare_reviews, scored_reviews, tiny_project

STSREG = os.path.join(os.path.dirname(sys.executable), "stsreg")

pytestmark = pytest.mark.slow  # ~4 min: three runs of the chain on the tiny project


def _run(project, *cmd, check=True) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "PREFECT_", "STSREG_DATA_MIRROR"))}
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    out = subprocess.run(list(cmd), cwd=project, env={**env, **GIT_IDENTITY}, capture_output=True, text=True,
                         timeout=900)
    if check:
        assert out.returncode == 0, f"{' '.join(cmd)}:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out


def _started_from(project) -> dict:
    return json.loads((project / "models/stage2/training_summary.json").read_text())["started_from"]


@pytest.mark.timeout(1800)
def test_the_champion_is_a_tracked_input_of_a_warm_stage_2(tiny_backbone, tmp_path):
    from stsreg.infra import tracking
    from stsreg.product.champion_pin import NO_CHAMPION, pin_champion, read_pin
    from stsreg.product.model_files import weights_digest

    project = declare_reviews(tiny_project(tmp_path, tiny_backbone, git=True))
    params = yaml.safe_load((project / "params.yaml").read_text())
    # every warm run hands on what it trained (the tiny model's step 0 may stay best on dev), so a version is registered
    params["stage2"].update(keep="trained")
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    _run(project, "git", "commit", "-qam", "keep trained")
    assert read_pin(project / "champion.json").why == NO_CHAMPION  # what a fresh clone pins

    _run(project, "dvc", "repro", "promote")
    assert _started_from(project) == {"from": "stage1", "why": NO_CHAMPION}
    # v1 the champion whatever the gate said of the tiny model
    _run(project, STSREG, "champion", "set", "1", "--reason", "the first champion")
    _run(project, "git", "checkout", "champion.json")  # the set pinned it; a clone of the commit pins none
    assert _run(project, "dvc", "status", "promote", "--quiet", check=False).returncode == 0

    scored_reviews(40, 11).to_csv(tmp_path / "new.csv", index=False)
    added = _run(project, STSREG, "data", "add", str(tmp_path / "new.csv"), "--table", "reviews")
    assert "champion.json: champion v1 (run " in added.stdout + added.stderr
    pin = read_pin(project / "champion.json")
    assert pin.version == 1 and len(pin.weights) == 64 and pin.backbone == tiny_backbone
    status = _run(project, "dvc", "status", "stage2").stdout
    assert "champion.json" in status and "modified" in status

    _run(project, "dvc", "repro", "promote")  # by hand, nothing set: warm from the pinned v1
    origin = _started_from(project)
    assert origin["from"] == "champion" and origin["version"] == 1 and origin["weights"] == pin.weights
    assert origin["rows"]["new"] > 0
    first = weights_digest(project / "models/stage2")
    _run(project, "git", "add", "-A")
    _run(project, "git", "commit", "-qm", "a warm retrain from v1")

    # the champion moves by hand to the version that retrain registered: the pin follows and dvc status says so
    _run(project, STSREG, "champion", "set", "2", "--reason", "move the alias")
    assert read_pin(project / "champion.json").version == 2
    assert "champion.json" in _run(project, "dvc", "status", "stage2").stdout
    # the commit's pin (v1) back: dvc repro reproduces its warm stage 2 from v1, bit for bit, whatever the alias says
    _run(project, "git", "checkout", "champion.json")
    assert _run(project, "dvc", "status", "stage2", "--quiet", check=False).returncode == 0
    _run(project, "dvc", "repro", "--force", "--single-item", "stage2")
    assert _started_from(project)["version"] == 1
    assert weights_digest(project / "models/stage2") == first

    # the champion (v2) is this checkout's own stage 2: the retrain flow's pin stays where the commit put it
    kept, changed = pin_champion(project / "champion.json", tracking.embedded_uri(project),
                                 own_model=project / "models/stage2")
    assert not changed and kept.version == 1

    # by hand, as docs/own_data.md prints it: the registry's champion (v2) pinned, and dvc status names the file
    pinned = _run(project, STSREG, "champion", "pin").stdout
    assert pinned.startswith("champion.json: champion v2 (run ") and "(pinned): the next stage 2 continues it" in pinned
    status = _run(project, "dvc", "status").stdout
    assert "stage2:" in status and "modified:" in status and "champion.json" in status

"""The path a user takes outside this checkout: build the wheel, install it non-editably into a fresh venv with the
project's own install script (offline: the lock from uv's cache, torch from the local wheel folder), then, from a
folder that is not the source tree, import every module, ask `stsreg --version` and run one tiny stage."""

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.conftest import FIXTURE_RAW, REPO, fixture_registry

SOURCE_PACKAGES = ("src/stsreg", "pipelines")


def _modules_in_tree() -> set[str]:
    names = set()
    for root in SOURCE_PACKAGES:
        base = REPO / root
        for path in base.rglob("*.py"):
            rel = path.relative_to(base.parent).with_suffix("")
            names.add(".".join(rel.parts).removesuffix(".__init__"))
    return names


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out), str(REPO)],
                   check=True, capture_output=True, text=True, cwd=out)
    (whl,) = out.glob("stsreg-*.whl")
    return whl


def test_the_wheel_holds_every_module_of_the_tree(wheel):
    with zipfile.ZipFile(wheel) as zf:
        packaged = {n.removesuffix(".py").replace("/", ".").removesuffix(".__init__") for n in zf.namelist()
                    if n.endswith(".py")}
    assert _modules_in_tree() - packaged == set()


def test_installed_wheel_imports_everything_and_runs_a_stage_outside_the_source_tree(wheel, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin/python"
    env = {"PATH": f"{venv / 'bin'}{os.pathsep}/usr/bin:/bin", "HOME": os.environ.get("HOME", str(tmp_path)),
           "HF_HUB_OFFLINE": "1", "DO_NOT_TRACK": "true", "UV_CACHE_DIR": os.environ.get("UV_CACHE_DIR", "")}
    env = {k: v for k, v in env.items() if v}
    install = subprocess.run(
        ["bash", str(REPO / "scripts/install.sh"), "--python", str(python), "--wheel", str(wheel), "--offline"],
        env={**env, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"},
        capture_output=True,
        text=True,
    )
    assert install.returncode == 0, install.stderr[-3000:]
    work = tmp_path / "elsewhere"
    work.mkdir()
    modules = sorted(_modules_in_tree())
    probe = ("import importlib, sys, stsreg\n"
             f"for m in {modules!r}: importlib.import_module(m)\nprint(stsreg.__file__)")
    where = subprocess.run([str(python), "-c", probe], cwd=work, env=env, capture_output=True, text=True)
    assert where.returncode == 0, where.stderr[-3000:]
    assert where.stdout.strip().startswith(str(venv)) and str(REPO) not in where.stdout  # the wheel, not the source
    version = subprocess.run([str(venv / "bin/stsreg"), "--version"], cwd=work, env=env, capture_output=True, text=True)
    assert version.stdout.strip() == "stsreg 0.1.0"
    (work / "params.yaml").write_text("prepare:\n  max_rejected_fraction: 1.0\n  nli_train: [snli/dev]\n")
    stage = subprocess.run([str(venv / "bin/stsreg"), "prepare", "--raw", str(FIXTURE_RAW), "--registry",
                            str(fixture_registry(work / "data/sources.json"))], cwd=work, env=env,
                           capture_output=True, text=True)
    assert stage.returncode == 0, stage.stderr[-3000:]
    assert (work / "data/prepared/sts.parquet").is_file() and (work / "metrics/data.json").is_file()

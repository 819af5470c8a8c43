"""Declared = imported (deptry over src/ and pipelines/), package discovery that cannot miss a subpackage, and the
worker image's Dockerfile linted (hadolint; no Docker engine is needed to lint it)."""

import subprocess
import sys
import tomllib
from pathlib import Path

from tests.conftest import REPO

BIN = Path(sys.executable).parent


def test_every_import_is_declared_and_every_declared_package_is_used():
    run = subprocess.run([str(BIN / "deptry"), "src", "pipelines"], cwd=REPO, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr


def test_packages_are_found_not_listed():
    tool = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert "packages" in tool and set(tool["packages"]) == {"find"}  # a list would miss the next subpackage


def test_the_worker_dockerfile_passes_hadolint_and_uses_the_install_script():
    run = subprocess.run([str(BIN / "hadolint"), "Dockerfile"], cwd=REPO, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    text = (REPO / "Dockerfile").read_text()
    assert "scripts/install.sh" in text and "-e ." not in text  # the tested install path, non-editable

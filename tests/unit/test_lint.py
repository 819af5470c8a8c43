"""The lint the suite runs: ruff with the project's configuration (``[tool.ruff]`` in pyproject.toml: lines within 120
characters) over every Python file of the repository, as ``make lint`` runs it."""

import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO

RUFF = Path(sys.executable).parent / "ruff"


def test_ruff_finds_nothing():
    run = subprocess.run([str(RUFF), "check", "--no-cache", "src", "pipelines", "tests", "benchmarks", "scripts"],
                         cwd=REPO, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]


def test_the_lint_catches_a_long_line(tmp_path):
    """The check can fail: a 121-character line is reported under the project's configuration."""
    bad = tmp_path / "long.py"
    bad.write_text("x = '" + "a" * 115 + "'\n")
    run = subprocess.run([str(RUFF), "check", "--no-cache", "--config", str(REPO / "pyproject.toml"), str(bad)],
                         cwd=REPO, capture_output=True, text=True)
    assert run.returncode == 1 and "E501" in run.stdout, run.stdout + run.stderr

"""The project ``make bench-loop`` times the loop in: the worked example of docs/own_data.md in a clone of this one.

The clone (``build/bench-loop/project`` by default) shares this project's DVC cache (so what ``make run`` computed is
not computed again), reads the same raw data mirror, and has its own MLflow store, Prefect server and ports. Its
``params.yaml`` declares the example's ``qa`` table (``scripts/own_data_example.py``: 80% of 1,588 scored
question/answer pairs on 0-1; the other 20% are the rows the loop adds), trains on it beside STS-B and SICK-R, selects
on its dev split and gates on ``qa`` with avg7 as a guard (unseen pairs), as the docs' entry does. ``overrides``
(``-S`` style ``key=value``) cut what a small machine cannot afford; they are written into the report.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

#: The example table, as docs/own_data.md declares it.
QA = {"name": "qa", "file": "data/tables/qa_pairs.jsonl",
      "columns": {"sentence1": "text_a", "sentence2": "text_b", "score": "similarity"},
      "scale": [0, 1], "d": 0.2, "dev_fraction": 0.15, "test_fraction": 0.25}
#: The rows that "arrive later" (written beside the project by the example script).
NEW_ROWS = "qa_new_rows.jsonl"
GIT = {"GIT_AUTHOR_NAME": "stsreg bench", "GIT_AUTHOR_EMAIL": "bench@localhost",
       "GIT_COMMITTER_NAME": "stsreg bench", "GIT_COMMITTER_EMAIL": "bench@localhost"}


def _run(cmd: list[str], cwd: Path, **kw) -> None:
    proc = subprocess.run(cmd, cwd=cwd, text=True, capture_output=True, env={**os.environ, **GIT}, **kw)
    if proc.returncode:
        raise SystemExit(f"`{' '.join(cmd)}` failed in {cwd} (exit {proc.returncode}):\n"
                         f"{(proc.stdout + proc.stderr)[-3000:]}")


def _set(tree: dict, dotted: str, value) -> None:
    *path, last = dotted.split(".")
    for key in path:
        tree = tree.setdefault(key, {})
    tree[last] = value


def example_params(params: dict, overrides: list[str]) -> dict:
    """``params`` (a project's params.yaml, parsed) with the example table declared and ``overrides`` applied."""
    tables = [t for t in params["prepare"]["sts_tables"] if t["name"] != QA["name"]]
    params["prepare"]["sts_tables"] = [*tables, QA]
    params["stage2"].update(train_tables=["stsb", "sickr", "qa"], dev_table="qa")
    params["promote"].update(metrics=["qa"], guards={"avg7": 0.3}, unseen_only=True)
    params["serve"]["scale"] = [0, 1]
    for item in overrides:
        key, _, value = item.partition("=")
        _set(params, key, yaml.safe_load(value))
    return params


def make_project(source: Path, dest: Path, overrides: list[str]) -> Path:
    """A clone of ``source`` at ``dest`` with the example declared and committed (nothing done when it exists);
    returns it."""
    if (dest / "params.yaml").exists():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    _run(["git", "clone", "-q", str(source), str(dest)], source)
    cache = subprocess.run(["dvc", "cache", "dir"], cwd=source, text=True, capture_output=True).stdout.strip()
    _run(["dvc", "cache", "dir", "--local", cache or str(source / ".dvc/cache")], dest)
    params = yaml.safe_load((dest / "params.yaml").read_text(encoding="utf-8"))
    mirror = (source / params["fetch"]["mirror"]).resolve()
    _run([sys.executable, "scripts/own_data_example.py", "--mirror", str(mirror), "--new", f"../{NEW_ROWS}"], dest)
    params["fetch"]["mirror"] = str(mirror)
    (dest / "params.yaml").write_text(yaml.safe_dump(example_params(params, overrides), sort_keys=False),
                                      encoding="utf-8")
    _run(["git", "add", "params.yaml", QA["file"]], dest)
    _run(["git", "commit", "-qm", "the worked example's qa table, declared (make bench-loop)"], dest)
    return dest

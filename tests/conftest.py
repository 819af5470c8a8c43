"""Shared test fixtures. Tests never touch the network or a model hub."""

from __future__ import annotations

import dataclasses
import os
import shutil
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("DVC_NO_ANALYTICS", "1")
os.environ.setdefault("DO_NOT_TRACK", "true")

REPO = Path(__file__).resolve().parents[1]
FIXTURE_RAW = REPO / "tests" / "fixtures" / "raw"
SHARED_DATA = Path(os.environ.get("STSREG_SHARED_DATA", REPO.parent / "shared" / "data"))


@pytest.fixture
def raw_tree(tmp_path: Path) -> Path:
    """A writable copy of the small fixture tree in every real raw format (with broken rows)."""
    dest = tmp_path / "raw"
    shutil.copytree(FIXTURE_RAW, dest)
    return dest


def replace_params(params, **sections):
    """``dataclasses.replace`` on nested sections: replace_params(p, prepare={"max_rejected_fraction": 1.0})."""
    changes = {}
    for name, values in sections.items():
        current = getattr(params, name)
        nested = {}
        for key, value in values.items():
            sub = getattr(current, key)
            nested[key] = dataclasses.replace(sub, **value) if isinstance(value, dict) and dataclasses.is_dataclass(sub) else value
        changes[name] = dataclasses.replace(current, **nested)
    return dataclasses.replace(params, **changes)

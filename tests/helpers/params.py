"""The params contract in tests: record which params code reads, and what dvc.yaml declares for a stage."""

import dataclasses

import yaml

from stsreg.infra.config import Params, param_keys
from tests.conftest import REPO


class Recorder:
    """Wraps a params dataclass and records the dotted name of every leaf the code reads."""

    def __init__(self, obj, seen: set, prefix: str = ""):
        self._obj, self._seen, self._prefix = obj, seen, prefix

    def __getattr__(self, name):
        value = getattr(self._obj, name)
        path = f"{self._prefix}{name}"
        if dataclasses.is_dataclass(value):
            return Recorder(value, self._seen, path + ".")
        self._seen.add(path)
        return value


def declared(stage: str) -> set[str]:
    spec = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"][stage]
    keys = set()
    all_keys = param_keys(Params)
    for entry in spec.get("params", []):
        expanded = {k for k in all_keys if k == entry or k.startswith(entry + ".")}
        assert expanded, f"dvc.yaml stage {stage} declares unknown param {entry}"
        keys |= expanded
    return keys

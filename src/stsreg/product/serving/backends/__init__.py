"""The serving backends, each a module behind one small protocol (:class:`Backend`): how to write its file into a
saved model folder (``export``) and how to run a loaded model on it (``load``). Their names, files and help are
declared in :mod:`stsreg.infra.backend_specs`; :data:`REGISTRY` maps each declared name to its module, in export order.
A new backend is its entry there, its module here and the module's import below.
"""

from __future__ import annotations

from importlib import import_module
from pathlib import Path
from types import ModuleType
from typing import Protocol

from stsreg.infra.backend_specs import BACKENDS, BY_NAME
# imported by name too, so that the stages' code dependencies (dvc.yaml, scripts/sync_dvc_deps.py) name their files
from stsreg.product.serving.backends import onnx_fp32, onnx_int8, torch_weights  # noqa: F401


class Backend(Protocol):
    """What a backend module holds."""

    def export(self, folder: Path, out: Path) -> None:
        """Write the backend's file ``out`` for the saved model ``folder`` (the files of the backends declared before
        it are there)."""

    def load(self, model, file: Path | None, threads: int):
        """Run ``model`` on this backend from now on (``file``: its file in the model's folder; None for a backend
        that has none); returns the model, moved where it runs. ``threads``: intra-op threads (0: the runtime's
        default)."""


REGISTRY: dict[str, ModuleType] = {b.name: import_module(f"{__name__}.{b.module}") for b in BACKENDS}


def file_of(name: str, folder: Path) -> Path | None:
    """Backend ``name``'s file in the model folder ``folder`` (None: it has none)."""
    return Path(folder) / BY_NAME[name].file if BY_NAME[name].file else None

"""The ``torch`` backend: the saved safetensors weights in PyTorch, on this process's device (a GPU where there is one)
in the model's precision. It has no file of its own: the weights are the model folder's."""

from __future__ import annotations

from pathlib import Path

def export(folder: Path, out: Path) -> None:
    raise TypeError("the torch backend runs the saved weights: it has no file to export")


def load(model, file: Path | None, threads: int):
    import torch

    from stsreg.infra.runtime import resolve_device

    model.runtime = None
    if threads:
        torch.set_num_threads(threads)
    return model.to(resolve_device())

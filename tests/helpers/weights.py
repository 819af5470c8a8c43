"""Read a saved model folder's tensors (encoder + head) for exact comparisons."""

from pathlib import Path

from safetensors.torch import load_file


def weights(folder: Path) -> dict:
    out = load_file(str(folder / "model.safetensors"))
    out.update({f"head.{k}": v for k, v in load_file(str(folder / "head.safetensors")).items()})
    return out

"""Content digests of what a stage writes, so that two runs compare by what they computed, not by bytes that carry
when or where they ran: tensors by name, dtype, shape and bits; tables by columns, dtypes and every cell's bits;
JSON without the keys that measure time, with the run's folder written as ``<root>``."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd

#: JSON keys whose values are clocks, not results (dropped before hashing, at any depth)
VOLATILE = frozenset({"wall_seconds", "train_seconds", "score_seconds", "seconds", "encode_seconds", "started",
                      "finished", "timestamp"})


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _scrub(value, root: str):
    if isinstance(value, dict):
        return {k: _scrub(v, root) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_scrub(v, root) for v in value]
    if isinstance(value, str):
        return value.replace(root, "<root>")
    return value


def of_json(path: Path, root: Path) -> str:
    return _sha(json.dumps(_scrub(json.loads(path.read_text(encoding="utf-8")), str(root)), sort_keys=True).encode())


def of_table(frame: pd.DataFrame) -> str:
    """Columns, dtypes and each cell (floats by their bits, via pandas' row hash); row order counts."""
    head = json.dumps([[str(c), str(t)] for c, t in frame.dtypes.items()]).encode()
    cells = pd.util.hash_pandas_object(frame.astype({c: str for c in frame.columns if frame[c].dtype == object}),
                                       index=False).to_numpy().tobytes()
    return _sha(head + cells)


def of_arrays(arrays: dict[str, np.ndarray]) -> str:
    h = hashlib.sha256()
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        h.update(f"{name}|{a.dtype}|{a.shape}|".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def of_file(path: Path, root: Path) -> str:
    """One file's digest by its kind (safetensors, torch state, parquet, JSON; other files by their bytes)."""
    if path.suffix == ".safetensors":
        from safetensors.numpy import load_file

        try:
            return of_arrays(load_file(str(path)))
        except (TypeError, ValueError):  # a dtype NumPy lacks (bf16): the torch loader reads it
            from safetensors.torch import load_file as load_torch

            return of_arrays({k: v.float().numpy() for k, v in load_torch(str(path)).items()})
    if path.suffix in (".pt", ".pth", ".bin"):
        import torch

        state = torch.load(path, map_location="cpu", weights_only=True)
        if isinstance(state, dict) and all(hasattr(v, "numpy") for v in state.values()):
            return of_arrays({k: v.float().numpy() for k, v in state.items()})
    if path.suffix == ".parquet":
        return of_table(pd.read_parquet(path))
    if path.suffix == ".json":
        return of_json(path, root)
    return _sha(path.read_bytes().replace(str(root).encode(), b"<root>"))


def of_tree(path: Path, root: Path, skip: tuple[str, ...] = ()) -> dict[str, str]:
    """``{relative path: digest}`` of every file under ``path`` (a file alone: its own name), ``skip`` names left out."""
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    base = path.parent if path.is_file() else path
    return {str(f.relative_to(base)): of_file(f, root) for f in files if f.name not in skip}

"""What a golden case's output is compared by, so that two runs compare by what they computed, not by bytes that
carry when or where they ran, nor by the CPU's rounding.

Two kinds of output (:func:`of_tree` with ``exact=``):

- **exact** (data, tokenization, splits, rejects: integer and string work, whose results do not depend on the CPU):
  a SHA-256 of the content: tensors by name, dtype, shape and bits; tables by columns, dtypes and every cell's bits;
  JSON without the keys that measure time, with the run's folder written as ``<root>``.
- **numeric** (anything trained or computed in floating point): a :class:`Print` -- a SHA-256 of everything that is
  not a float (names, dtypes, shapes, integer and string cells, JSON keys, strings and integers) plus, per float
  array, table column or JSON number, a few numbers compared with a relative tolerance.

Why a tolerance, and why this one. The same code and libraries on another instruction set (AVX2 only, AVX-512, AMX)
sum in another order: oneDNN and MKL pick their kernels by CPU, and ``ATEN_CPU_CAPABILITY=default``,
``MKL_CBWR=COMPATIBLE`` and ``ONEDNN_MAX_CPU_ISA`` pin only part of that. Measured on the golden cases
(docs/architecture.md, "Golden runs"): every trained tensor moves by at most 2e-5 of its norm between kernel sets,
while stage 2's learning rate times 1.001 moves the tensors it trains by 1e-3 (times 1.0001: 1.4e-4). So a tensor
holds when its sketch moved by at most :data:`RTOL` = 1e-4 of its size: 5x above the largest drift seen, 10x below
the smallest learning-rate change we promise to catch (x 1.001).

A float array is kept as a *sketch*: ``S @ x`` for a fixed random sign matrix ``S`` of :data:`SKETCH` rows scaled by
``1/sqrt(SKETCH)``, so ``|S x|`` estimates ``|x|`` and ``|S x - S y|`` estimates ``|x - y|`` (Johnson-Lindenstrauss)
in a few numbers per tensor, whatever its size.

Some parameters have no gradient by construction, so Adam turns rounding noise into full-size steps and they carry
nothing but the CPU's rounding: every attention key bias (softmax is unchanged by adding the same number to every
score of a query) and, for objectives that only see differences of embeddings (the triplet loss), the last layer's
LayerNorm bias. :data:`FREE` lists them: their names, dtypes and shapes are compared, their values are not."""

from __future__ import annotations

import functools
import hashlib
import json
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd

#: JSON keys whose values are clocks, not results (dropped before hashing, at any depth)
VOLATILE = frozenset({"wall_seconds", "train_seconds", "score_seconds", "seconds", "encode_seconds", "started",
                      "finished", "timestamp"})
#: Relative tolerance of a numeric output's values (module docstring: why 1e-4).
RTOL = 1e-4
#: Absolute floor, so that values at zero compare (a float32's rounding at 1.0 is 6e-8).
ATOL = 1e-7
#: Rows of the sketch kept per float array.
SKETCH = 8
#: Parameters that training leaves to rounding noise (module docstring): compared by name, dtype and shape only.
FREE = re.compile(r"attention\.self\.key\.bias$")
#: The same for an objective that sees only differences of embeddings: the last layer's LayerNorm bias too.
FREE_SHIFT = re.compile(r"attention\.self\.key\.bias$|encoder\.layer\.1\.output\.LayerNorm\.bias$")


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@functools.lru_cache(maxsize=64)
def _signs(n: int) -> np.ndarray:
    """The fixed ``(SKETCH, n)`` sign matrix (seeded by ``n`` alone: the same on every machine)."""
    rng = np.random.default_rng(n)
    return (rng.integers(0, 2, size=(SKETCH, n)) * 2 - 1).astype(np.float64) / math.sqrt(SKETCH)


def sketch(values: np.ndarray) -> list[float]:
    """``SKETCH`` numbers whose distances estimate the array's (module docstring), to 10 significant digits."""
    x = np.asarray(values, dtype=np.float64).ravel()
    return [float(f"{v:.10g}") for v in _signs(x.size) @ np.where(np.isfinite(x), x, 0.0)]


class Print:
    """A numeric output's fingerprint: ``sha`` over what is not a float, ``values`` ``{name: [numbers]}``."""

    def __init__(self, sha: str, values: dict[str, list[float]]):
        self.sha, self.values = sha, values

    def to_json(self) -> dict:
        return {"sha": self.sha, "values": self.values}

    def __eq__(self, other) -> bool:
        return isinstance(other, Print) and self.sha == other.sha and not drift(self.values, other.values)


def drift(want: dict[str, list[float]], got: dict[str, list[float]]) -> list[str]:
    """The names whose numbers moved by more than ``RTOL`` of their size (or appeared / went missing). A JSON file's
    numbers (names starting with ``.``) compare as one vector: a correlation near its noise floor or an echoed setting
    is judged against the file's scale, not its own (:func:`print_value`)."""
    def too_far(a: np.ndarray, b: np.ndarray) -> bool:
        return a.shape != b.shape or np.linalg.norm(a - b) > RTOL * max(np.linalg.norm(a), np.linalg.norm(b)) + ATOL

    moved = [n for n in sorted(set(want) | set(got)) if not n.startswith(".")
             and too_far(np.asarray(want.get(n, []), float), np.asarray(got.get(n, []), float))]
    scalars = sorted(n for n in set(want) | set(got) if n.startswith("."))
    one_sided = sorted(set(scalars) - (set(want) & set(got)))
    if one_sided:
        return moved + one_sided
    a, b = (np.array([d[n][0] for n in scalars], float) for d in (want, got))
    if scalars and too_far(a, b):
        moved += [scalars[i] for i in np.argsort(-abs(a - b), kind="stable")[:3] if a[i] != b[i]]
    return moved


def load(entry) -> str | Print:
    """One ``hashes.json`` entry: a SHA-256 string (exact) or a :class:`Print`'s JSON (numeric)."""
    return entry if isinstance(entry, str) else Print(entry["sha"], entry["values"])


def dump(entry: str | Print):
    return entry if isinstance(entry, str) else entry.to_json()


# --- exact digests -------------------------------------------------------------------------------------------------

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


# --- numeric prints ------------------------------------------------------------------------------------------------

def print_arrays(arrays: dict[str, np.ndarray], free: re.Pattern = FREE) -> Print:
    """Names, dtypes and shapes exactly; integer arrays by their bits; float arrays by :func:`sketch` (those
    matching ``free``: not at all)."""
    h, values = hashlib.sha256(), {}
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        h.update(f"{name}|{a.dtype}|{a.shape}|".encode())
        if not np.issubdtype(a.dtype, np.floating):
            h.update(a.tobytes())
        elif not free.search(name):
            values[name] = sketch(a)
    return Print(h.hexdigest(), values)


def print_value(value, root: str) -> Print:
    """A JSON-like value as :func:`of_json` sees it (clock keys dropped, the run's folder as ``<root>``), its floats
    by themselves (named by their path, from ``.``; compared as one vector by :func:`drift`), the rest exactly."""
    values: dict[str, list[float]] = {}

    def walk(v, path: str):
        if isinstance(v, dict):
            return {k: walk(x, f"{path}.{k}") for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x, f"{path}[{i}]") for i, x in enumerate(v)]
        if isinstance(v, float):
            values[path] = [v if math.isfinite(v) else 0.0]
            return "<float>" if math.isfinite(v) else repr(v)
        return v

    shape = walk(_scrub(value, root), "")
    return Print(_sha(json.dumps(shape, sort_keys=True).encode()), values)


def print_table(frame: pd.DataFrame) -> Print:
    """Columns and dtypes, every non-float cell exactly; each float column by :func:`sketch`."""
    floats = [c for c in frame.columns if pd.api.types.is_float_dtype(frame[c])]
    rest = frame.drop(columns=floats)
    sha = _sha(of_table(rest).encode() + json.dumps([[str(c), str(frame[c].dtype)] for c in floats]).encode())
    return Print(sha, {str(c): sketch(frame[c].to_numpy(np.float64)) for c in floats})


# --- files ---------------------------------------------------------------------------------------------------------

def _tensors(path: Path) -> dict[str, np.ndarray] | None:
    if path.suffix == ".safetensors":
        from safetensors.numpy import load_file

        try:
            return load_file(str(path))
        except (TypeError, ValueError):  # a dtype NumPy lacks (bf16): the torch loader reads it
            from safetensors.torch import load_file as load_torch

            return {k: v.float().numpy() for k, v in load_torch(str(path)).items()}
    if path.suffix in (".pt", ".pth", ".bin"):
        import torch

        state = torch.load(path, map_location="cpu", weights_only=True)
        if isinstance(state, dict) and all(hasattr(v, "numpy") for v in state.values()):
            return {k: v.float().numpy() for k, v in state.items()}
    if path.suffix == ".npy":
        return {"array": np.load(path)}
    return None


def of_file(path: Path, root: Path, exact: bool = True, free: re.Pattern = FREE) -> str | Print:
    """One file's digest by its kind (safetensors, torch state, NumPy array, parquet, JSON; other files by their
    bytes): exact, or a :class:`Print` of its numbers."""
    tensors = _tensors(path)
    if tensors is not None:
        return of_arrays(tensors) if exact else print_arrays(tensors, free)
    if path.suffix == ".parquet":
        frame = pd.read_parquet(path)
        return of_table(frame) if exact else print_table(frame)
    if path.suffix == ".json":
        return of_json(path, root) if exact else print_value(json.loads(path.read_text(encoding="utf-8")), str(root))
    return _sha(path.read_bytes().replace(str(root).encode(), b"<root>"))


def of_tree(path: Path, root: Path, skip: tuple[str, ...] = (), exact: bool = False,
            free: re.Pattern = FREE) -> dict[str, str | Print]:
    """``{relative path: digest}`` of every file under ``path`` (a file alone: its own name), ``skip`` names left
    out; ``exact``: SHA-256 digests, else numbers as :class:`Print` (module docstring)."""
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    base = path.parent if path.is_file() else path
    return {str(f.relative_to(base)): of_file(f, root, exact, free) for f in files if f.name not in skip}

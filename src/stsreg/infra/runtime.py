"""Where code runs: seeding, the device, and the torchrun world (DDP) — shared by training, evaluation,
profiling and the comparison.

    >>> world()              # plain run: (world_size, rank)
    (1, 0)
"""

from __future__ import annotations

import functools
import os
import random
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist


def cache_dir(name: str) -> Path:
    """``<cache root>/<name>``: a cache of the project's runs (``tokens``: token tables, :mod:`stsreg.product.tokens`).
    The root is ``$STSREG_CACHE``, default ``cache`` under the working directory (the project root, where every stage
    runs). Deleting it loses nothing but time."""
    return Path(os.environ.get("STSREG_CACHE", "cache")) / name


def set_seed(seed: int) -> None:
    """Seed Python's, NumPy's and torch's global generators (every stage calls this first)."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def rng_state() -> dict:
    """The global generators' states (a checkpoint stores them so a resumed run draws the same numbers)."""
    return {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state(),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []}


def set_rng_state(s: dict) -> None:
    random.setstate(s["python"])
    np.random.set_state(s["numpy"])
    torch.set_rng_state(s["torch"])
    if s["cuda"]:
        torch.cuda.set_rng_state_all(s["cuda"])


def world() -> tuple[int, int]:
    """(world_size, rank) from torchrun's environment; (1, 0) when run plainly."""
    return int(os.environ.get("WORLD_SIZE", "1")), int(os.environ.get("RANK", "0"))


def is_main_process() -> bool:
    return world()[1] == 0


def init_distributed(device: torch.device) -> None:
    """Join the process group torchrun set up (nccl on CUDA, gloo on CPU); no-op for a single process."""
    if world()[0] > 1 and not dist.is_initialized():
        dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")


def barrier() -> None:
    """Wait for every DDP process; no-op for a single process."""
    if dist.is_initialized():
        dist.barrier()


def any_rank(flag: bool) -> bool:
    """Whether ``flag`` holds on any DDP process (all of them must call it); ``flag`` for a single process."""
    if not dist.is_initialized():
        return flag
    device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else None
    t = torch.tensor([int(flag)], device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return bool(t.item())


def resolve_device(name: str = "auto") -> torch.device:
    """``auto``: this process's GPU (``LOCAL_RANK``) when CUDA is available, else the CPU; any other name as given."""
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        return torch.device("cpu")
    return torch.device(name)


def device_name(device: torch.device | None = None) -> str:
    """The GPU's name, or ``cpu``; of ``device``, default the one training would use."""
    d = device or resolve_device()
    return torch.cuda.get_device_name(d) if d.type == "cuda" else "cpu"


@functools.lru_cache(maxsize=1)
def cpu_flags() -> frozenset[str]:
    """The CPU feature flags of ``/proc/cpuinfo`` (empty where the file does not exist)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()

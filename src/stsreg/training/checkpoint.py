"""Stage 2's resumable checkpoint: weights, optimizer, scheduler, every process's RNG states and the loop state.

Written atomically (temp file + rename) so a crash, even ``kill -9``, leaves the previous one intact; resumed only
by a run with the same fingerprint (configuration, seed, process count, precision, starting weights, data).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import torch
import torch.distributed as dist

from stsreg import runtime

log = logging.getLogger(__name__)


class Checkpointer:
    """``ckpt_dir/last.pt`` for the objects of one run. ``fingerprint`` names what may resume it; ``config`` (the
    resolved params) is stored beside it, so a checkpoint says how it was made."""

    def __init__(self, ckpt_dir: Path, fingerprint: str, config: dict, model, optimizer, scheduler):
        self.path = Path(ckpt_dir) / "last.pt"
        self.fingerprint, self.config = fingerprint, config
        self.model, self.optimizer, self.scheduler = model, optimizer, scheduler
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def resume(self, rank: int) -> dict | None:
        """Load the checkpoint into the model, optimizer, scheduler and this process's RNGs; returns its loop state,
        or None when there is none or it belongs to another run."""
        if not self.path.exists():
            return None
        ckpt = torch.load(self.path, map_location="cpu", weights_only=False)
        if ckpt["fingerprint"] != self.fingerprint:
            log.info("ignoring checkpoint %s: it belongs to another configuration or data", self.path)
            return None
        self.model.load_state_dict(ckpt["model"])
        self.optimizer.load_state_dict(ckpt["optimizer"])
        self.scheduler.load_state_dict(ckpt["scheduler"])
        runtime.set_rng_state(ckpt["rng"][rank] if isinstance(ckpt["rng"], list) else ckpt["rng"])
        log.info("resuming stage 2 from step %d (%s)", ckpt["state"]["step"], self.path)
        return ckpt["state"]

    def save(self, state: dict, world_size: int, rank: int) -> None:
        """Every process contributes its RNG states; rank 0 writes."""
        rngs = [None] * world_size
        if world_size > 1:
            dist.all_gather_object(rngs, runtime.rng_state())
        else:
            rngs = [runtime.rng_state()]
        if rank == 0:
            tmp = self.path.with_suffix(".tmp")
            torch.save({"fingerprint": self.fingerprint, "config": self.config, "model": self.model.state_dict(),
                        "optimizer": self.optimizer.state_dict(), "scheduler": self.scheduler.state_dict(),
                        "rng": rngs, "state": state}, tmp)
            os.replace(tmp, self.path)

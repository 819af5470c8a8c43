"""Stage 2's resumable checkpoint: weights, optimizer, scheduler, every process's RNG states and the loop state.

Written atomically (temp file + rename) so a crash, even ``kill -9``, leaves the previous one intact; resumed only
by a run with the same key (configuration, seed, process count, precision, starting weights, data and the code of the
loop). A checkpoint with another key is left alone and the run starts from step 0, saying in one line which parts
of the key differ.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import torch
import torch.distributed as dist

from stsreg.infra import runtime
from stsreg.infra.hashing import fingerprint

log = logging.getLogger(__name__)


def key_mismatch(saved: dict, current: dict) -> str:
    """The parts of a checkpoint key (``{part: digest}``) that differ, as ``code, data``; empty when equal."""
    return ", ".join(sorted(k for k in saved.keys() | current.keys() if saved.get(k) != current.get(k)))


class Checkpointer:
    """``ckpt_dir/last.pt`` for the objects of one run. ``key`` (``{part: JSON-able value}``: config, seed, data,
    code ...) names what may resume it; ``config`` (the resolved params) is stored beside it, so a checkpoint says how
    it was made."""

    def __init__(self, ckpt_dir: Path, key: dict, config: dict, model, optimizer, scheduler):
        self.path = Path(ckpt_dir) / "last.pt"
        self.key_parts = {name: fingerprint(value) for name, value in key.items()}
        self.fingerprint, self.config = fingerprint(self.key_parts), config
        self.model, self.optimizer, self.scheduler = model, optimizer, scheduler
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.saved_at = time.monotonic()

    def due(self, every_s: float) -> bool:
        """Whether ``every_s`` seconds passed since the last save (or the start), as every process agrees (the save
        gathers their RNG states, so all of them must save together): checkpoints by time, not steps."""
        return runtime.any_rank(time.monotonic() - self.saved_at >= every_s)

    def resume(self, rank: int) -> dict | None:
        """Load the checkpoint into the model, optimizer, scheduler and this process's RNGs; returns its loop state,
        or None when there is none or it belongs to another run."""
        if not self.path.exists():
            return None
        ckpt = torch.load(self.path, map_location="cpu", weights_only=False)
        if ckpt["fingerprint"] != self.fingerprint:
            why = key_mismatch(ckpt["key_parts"], self.key_parts) if "key_parts" in ckpt else "an older key (no parts)"
            if rank == 0:
                print(f"starting from step 0: checkpoint {self.path} was made with other {why}")
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
            torch.save({"fingerprint": self.fingerprint, "key_parts": self.key_parts, "config": self.config,
                        "model": self.model.state_dict(),
                        "optimizer": self.optimizer.state_dict(), "scheduler": self.scheduler.state_dict(),
                        "rng": rngs, "state": state}, tmp)
            os.replace(tmp, self.path)
        self.saved_at = time.monotonic()

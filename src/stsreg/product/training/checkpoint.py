"""A training run's resumable checkpoint: the state dicts of its objects (model, optimizer, schedule, ...), every
process's RNG states and the loop's state, in one file.

Written atomically (temp file + rename) so a crash, even ``kill -9``, leaves the previous one intact; resumed only
by a run with the same key (configuration, seed, process count, precision, starting weights, data, the code of the
loop: what the caller declares in :class:`CheckpointPlan`). A checkpoint with another key is left alone and the run
starts from step 0, saying in one line which parts of the key differ. The loop that writes it is
:func:`stsreg.product.training.resumable.run_steps`.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.distributed as dist

from stsreg.infra import runtime
from stsreg.infra.hashing import fingerprint

log = logging.getLogger(__name__)


def key_mismatch(saved: dict, current: dict) -> str:
    """The parts of a checkpoint key (``{part: digest}``) that differ, as ``code, data``; empty when equal."""
    return ", ".join(sorted(k for k in saved.keys() | current.keys() if saved.get(k) != current.get(k)))


@dataclass(frozen=True)
class CheckpointPlan:
    """Where a run's checkpoint goes, what may resume it and how often it is written.

    ``path``: the file; ``key``: ``{part: JSON-able value}`` (config, seed, data, code ...) a resuming run must share
    (empty: any run with this path resumes it); written every ``every_steps`` steps, or, with ``every_s``, once that
    many seconds passed since the last save (by time: a GPU at ~15 steps/s writes what it needs), and at each epoch
    end; ``what``: how messages name the run."""

    path: Path
    key: dict = field(default_factory=dict)
    every_steps: int = 0
    every_s: float | None = None
    what: str = "training"


class Checkpoint:
    """:class:`CheckpointPlan`'s file for one run: the state dicts of ``objects`` (``{name: object with state_dict /
    load_state_dict}``), the loop ``state`` (a dict the run mutates; ``state["step"]`` is the steps taken) and, stored
    beside them so a checkpoint says how it was made, ``config`` (the resolved params)."""

    def __init__(self, plan: CheckpointPlan, objects: dict, state: dict, config: dict | None = None):
        self.plan, self.objects, self.state, self.config = plan, objects, state, config
        self.key_parts = {name: fingerprint(value) for name, value in plan.key.items()}
        self.fingerprint = fingerprint(self.key_parts)
        state.setdefault("step", 0)
        Path(plan.path).parent.mkdir(parents=True, exist_ok=True)
        self.saved_at = time.monotonic()

    def resume(self, rank: int = 0) -> int:
        """Load the checkpoint into the objects, the loop state and this process's RNGs; returns the step it resumes
        from, 0 when there is none or it belongs to another run (the objects untouched)."""
        path = Path(self.plan.path)
        if not path.exists():
            return 0
        ckpt = torch.load(path, map_location="cpu", weights_only=False)
        if ckpt.get("fingerprint") != self.fingerprint or "objects" not in ckpt:
            why = key_mismatch(ckpt["key_parts"], self.key_parts) if "key_parts" in ckpt else "an older key (no parts)"
            if rank == 0:
                print(f"{self.plan.what}: starting from step 0: checkpoint {path} was made with other {why}")
            return 0
        for name, obj in self.objects.items():
            obj.load_state_dict(ckpt["objects"][name])
        self.state.update(ckpt["state"])
        runtime.set_rng_state(ckpt["rng"][rank])
        log.info("resuming %s from step %d (%s)", self.plan.what, self.state["step"], path)
        return self.state["step"]

    def due(self, step: int) -> bool:
        """Whether the plan's interval has passed at ``step``; by time, as every process agrees (the save gathers
        their RNG states, so all of them must save together)."""
        if self.plan.every_s is not None:
            return runtime.any_rank(time.monotonic() - self.saved_at >= self.plan.every_s)
        return bool(self.plan.every_steps) and step % self.plan.every_steps == 0

    def save(self, world_size: int = 1, rank: int = 0) -> None:
        """Every process contributes its RNG states; rank 0 writes."""
        rngs = [None] * world_size
        if world_size > 1:
            dist.all_gather_object(rngs, runtime.rng_state())
        else:
            rngs = [runtime.rng_state()]
        if rank == 0:
            path = Path(self.plan.path)
            tmp = path.with_suffix(".tmp")
            torch.save({"fingerprint": self.fingerprint, "key_parts": self.key_parts, "config": self.config,
                        "objects": {name: obj.state_dict() for name, obj in self.objects.items()},
                        "rng": rngs, "state": self.state}, tmp)
            os.replace(tmp, path)
        self.saved_at = time.monotonic()

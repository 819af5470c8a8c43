"""The project's pipeline lock (``.stsreg/pipeline.lock``): one stage or pipeline run at a time per project.

Every ``stsreg`` stage command holds it while it runs, so two runs started side by side (two terminals, a
scheduled retrain and a manual ``dvc repro``) queue instead of interleaving their writes. A flow that holds
it and runs ``dvc repro`` passes :data:`HELD_ENV` to that subprocess (:func:`held_env`), so the stages it
starts do not wait for their own parent. Under ``torchrun`` only rank 0 takes it (the other ranks wait for
rank 0 in the process group anyway).
"""

from __future__ import annotations

import os
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from filelock import FileLock, Timeout

from stsreg.infra.local_servers import STATE_DIR

#: Set (to the lock's path) in the environment of subprocesses started by a holder of the lock.
HELD_ENV = "STSREG_PIPELINE_LOCK_HELD"


def lock_path(project: Path) -> Path:
    return Path(project) / STATE_DIR / "pipeline.lock"


def held_env(project: Path) -> dict[str, str]:
    """The environment for a subprocess of the lock's holder: stages it runs skip taking the lock again."""
    return {**os.environ, HELD_ENV: str(lock_path(project).resolve())}


def _held_by_parent(path: Path) -> bool:
    return os.environ.get(HELD_ENV) == str(path.resolve()) or int(os.environ.get("RANK", "0")) > 0


@contextmanager
def pipeline_lock(project: Path, timeout_s: float = -1, announce: bool = False) -> Iterator[None]:
    """Hold the project's lock; wait up to ``timeout_s`` seconds (-1: as long as it takes).

    Raises ``TimeoutError`` when the wait runs out. ``announce`` prints one line to stderr when it has to wait."""
    path = lock_path(project)
    if _held_by_parent(path):
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(path))
    try:
        lock.acquire(timeout=0 if announce else timeout_s)
    except Timeout:
        if not announce:
            raise TimeoutError(
                f"another pipeline run holds {path} for more than {timeout_s:.0f} s; not starting"
            ) from None
        print(f"waiting for {path}: another stsreg stage or pipeline run holds it", file=sys.stderr, flush=True)
        try:
            lock.acquire(timeout=timeout_s)
        except Timeout:
            raise TimeoutError(
                f"another pipeline run holds {path} for more than {timeout_s:.0f} s; not starting"
            ) from None
    try:
        yield
    finally:
        lock.release()


#: DVC's own repository lock: held by every ``dvc repro`` / ``dvc commit`` from start to end (dvc.lock included).
DVC_LOCK = Path(".dvc") / "tmp" / "lock"


@contextmanager
def data_write_lock(project: Path, timeout_s: float = 3600.0) -> Iterator[None]:
    """What a write into the project's data (``stsreg data add``) holds: the pipeline lock (no stage runs beside it)
    and, in a DVC project, DVC's repository lock, so that no ``dvc repro`` is between reading a table and recording
    it in ``dvc.lock`` while the file grows (a by-hand ``dvc repro`` holds it across every stage and the hashing
    after them). Waits up to ``timeout_s`` seconds, saying once on stderr what it waits for; then ``TimeoutError``."""
    from dvc.lock import Lock, LockError

    deadline = time.monotonic() + timeout_s
    with pipeline_lock(project, timeout_s, announce=True):
        path = Path(project) / DVC_LOCK
        if not path.parent.is_dir():  # not a DVC project (or never run): nothing to exclude
            yield
            return
        lock, told = Lock(str(path)), False
        while True:
            try:
                lock._do_lock()  # one attempt of DVC's own lock (zc.lockfile), so that the wait is said at once
                break
            except LockError:
                if not told:
                    print(f"waiting for {path}: a `dvc repro` or another DVC command is running in this project",
                          file=sys.stderr, flush=True)
                    told = True
                if time.monotonic() > deadline:
                    raise TimeoutError(f"a `dvc repro` (or another DVC command) holds {path} for more than "
                                       f"{timeout_s:.0f} s; nothing was written") from None
                time.sleep(0.5)
        try:
            yield
        finally:
            lock.unlock()

"""The project's pipeline lock (``.stsreg/pipeline.lock``): one stage or pipeline run at a time per project.

Every ``stsreg`` stage command holds it while it runs, so two runs started side by side (two terminals, a
scheduled retrain and a manual ``dvc repro``) queue instead of interleaving their writes. A flow that holds
it and runs ``dvc repro`` passes :data:`HELD_ENV` to that subprocess (:func:`held_env`), so the stages it
starts do not wait for their own parent. Under ``torchrun`` only rank 0 takes it (the other ranks wait for
rank 0 in the process group anyway). Its holder writes who it is (``.stsreg/pipeline.holder.json``), so that
whoever waits is told what for (:func:`holder`). A write into the project's tables holds it only while no DVC
command runs (:func:`data_write_lock`).
"""

from __future__ import annotations

import json
import os
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from filelock import FileLock, Timeout

from stsreg.infra.dvc_busy import busy
from stsreg.infra.local_servers import STATE_DIR, alive

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
        print(f"waiting for {path}: held by {holder(project)}", file=sys.stderr, flush=True)
        try:
            lock.acquire(timeout=timeout_s)
        except Timeout:
            raise TimeoutError(
                f"another pipeline run holds {path} for more than {timeout_s:.0f} s; not starting"
            ) from None
    _write_holder(project)
    try:
        yield
    finally:
        lock.release()


def _holder_path(project: Path) -> Path:
    return Path(project) / STATE_DIR / "pipeline.holder.json"


def holder(project: Path) -> str:
    """Who holds the project's pipeline lock, in words (``PID 123, `stsreg train --stage 2`, since 12:01:05``), as its
    holder wrote it on taking it; "another stsreg stage or pipeline run" when that is not known."""
    try:
        info = json.loads(_holder_path(project).read_text(encoding="utf-8"))
        if alive(int(info["pid"])):
            since = time.strftime("%H:%M:%S", time.localtime(info["since"]))
            return f"PID {info['pid']}, `{info['cmd']}`, since {since}"
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return "another stsreg stage or pipeline run"


def _write_holder(project: Path) -> None:
    cmd = " ".join([Path(sys.argv[0]).name, *sys.argv[1:]])[:200]
    try:
        _holder_path(project).write_text(json.dumps({"pid": os.getpid(), "cmd": cmd, "since": time.time()}))
    except OSError:  # who holds it is only said to people waiting: never a reason to fail the holder
        pass


@contextmanager
def data_write_lock(project: Path, timeout_s: float = 3600.0) -> Iterator[None]:
    """What a write into the project's data (``stsreg data add``) holds: the pipeline lock, taken only while no DVC
    command runs in the project (:func:`stsreg.infra.dvc_busy.busy`: a ``dvc repro`` between its stages holds DVC's
    repository lock; one running a stage's command holds rwlock entries), so the rows land before a repro reads the
    table or after it has recorded what it read, never between. It never holds DVC's own lock: a ``dvc repro`` started
    during the add runs, and its stage commands (``stsreg prepare``) wait for the pipeline lock, then read every row.
    It never holds one lock while waiting for the other (a repro's stage command waits for the pipeline lock while
    DVC holds its rwlock entries). Waits up to ``timeout_s`` seconds (0: not at all), saying on stderr what it waits
    for; then ``TimeoutError`` saying what held it and that nothing was written."""
    deadline, said = time.monotonic() + timeout_s, None
    lock = FileLock(str(lock_path(project)))
    lock_path(project).parent.mkdir(parents=True, exist_ok=True)
    while True:
        try:
            lock.acquire(timeout=0)
        except Timeout:
            running = "; ".join(filter(None, [busy(project), f"the project's pipeline lock {lock_path(project)} held "
                                                             f"by {holder(project)}"]))
        else:
            running = busy(project)
            if running is None:
                break
            lock.release()
        if time.monotonic() >= deadline:
            waited = f"waited {timeout_s:.0f} s" if timeout_s > 0 else "--no-wait"
            raise TimeoutError(f"{running} ({waited}): nothing was written; add the rows again when it ends") from None
        if running != said:
            print(f"waiting (up to {timeout_s:.0f} s; --no-wait refuses at once) for: {running}", file=sys.stderr,
                  flush=True)
            said = running
        time.sleep(0.5)
    _write_holder(project)
    try:
        yield
    finally:
        lock.release()

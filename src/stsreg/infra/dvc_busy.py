"""What DVC is doing in a project right now, read without getting in its way: who holds its repository lock, and
which stages are running (their process and command).

A ``dvc repro`` holds the repository lock (``.dvc/tmp/lock``) from start to end *except while a stage's command
runs*: DVC releases it then (so that the command may call DVC) and takes it back to hash the outputs and write
``dvc.lock``. For the whole of a stage, command and hashing included, it holds read entries on the stage's
dependencies and write entries on its outputs in ``.dvc/tmp/rwlock`` (process id and command line). So a repro is
running exactly when the repository lock is held or a live process has an rwlock entry; :func:`busy` says which, in
words a person can act on. It never holds DVC's lock for more than one attempt (microseconds): DVC retries its own
lock for 3 s, so a ``dvc repro`` started at that moment waits instead of failing.
"""

from __future__ import annotations

import json
from pathlib import Path
from stsreg.infra.local_servers import alive

REPO_LOCK = Path(".dvc") / "tmp" / "lock"
RWLOCK = Path(".dvc") / "tmp" / "rwlock"


def _repo_lock_held(project: Path) -> bool:
    """Whether another process holds DVC's repository lock (one attempt to take it, released at once)."""
    from dvc.lock import Lock, LockError

    path = Path(project) / REPO_LOCK
    if not path.parent.is_dir():
        return False
    lock = Lock(str(path))
    try:
        lock._do_lock()  # one attempt of DVC's own lock (zc.lockfile), never its 3 s of retries
    except LockError:
        return True
    lock.unlock()
    return False


def running_stages(project: Path) -> list[tuple[int, str]]:
    """``(pid, command)`` of every live process with an entry in DVC's rwlock file (a stage running), sorted. An
    entry of a process that is gone (killed) is left out, as DVC itself treats it; a file caught mid-write counts as
    a stage running (``(0, "a DVC command")``)."""
    path = Path(project) / RWLOCK
    try:
        lock = json.loads(path.read_text(encoding="utf-8") or "{}")
    except FileNotFoundError:
        return []
    except (json.JSONDecodeError, OSError):
        return [(0, "a DVC command")]
    infos = list((lock.get("write") or {}).values())
    infos += [info for readers in (lock.get("read") or {}).values() for info in readers]
    return sorted({(int(i["pid"]), str(i["cmd"])) for i in infos if alive(int(i["pid"]))})


def _short(cmd: str) -> str:
    """A command line as a person typed it: ``/venv/bin/dvc repro`` (``.../dvc/__main__.py repro``): ``dvc repro``."""
    program, _, rest = cmd.partition(" ")
    path = Path(program)
    name = path.parent.name if path.name == "__main__.py" else path.name
    return f"{name} {rest}".strip()


def busy(project: Path) -> str | None:
    """None when no DVC command runs in ``project``; else what runs, in a line (``dvc repro`` (PID 123) running a
    stage; or a DVC command holding ``.dvc/tmp/lock``)."""
    stages = running_stages(project)
    if stages:
        return "; ".join(f"`{_short(cmd)}` (PID {pid})" if pid else cmd for pid, cmd in stages[:3]) + " running a stage"
    if _repo_lock_held(project):
        return f"a `dvc repro` or another DVC command holding {REPO_LOCK}"
    return None

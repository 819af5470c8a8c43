"""Processes a test started, as ``/proc`` shows them: whether one still runs, and the ephemeral Prefect servers one
started (Prefect runs that server as a child process on a free port when no ``PREFECT_API_URL`` is set)."""

from __future__ import annotations

import os


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, exited and not yet reaped, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def prefect_servers_of(pid: int) -> list[int]:
    """The ephemeral Prefect servers process ``pid`` started: its children running Prefect's server app."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat") as fh:
                parent = int(fh.read().split(")")[-1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                command = fh.read()
        except (ValueError, OSError):  # not a process, or gone meanwhile
            continue
        if parent == pid and b"prefect.server.api.server" in command:
            found.append(int(entry))
    return found

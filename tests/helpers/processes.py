"""Processes a test started, as psutil sees them: whether one still runs, and the ephemeral Prefect servers one
started (Prefect runs that server as a child process on a free port when no ``PREFECT_API_URL`` is set)."""

from __future__ import annotations

import contextlib

import psutil


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, exited and not yet reaped, does not)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def prefect_servers_of(pid: int) -> list[int]:
    """The ephemeral Prefect servers process ``pid`` started: its children running Prefect's server app."""
    try:
        children = psutil.Process(pid).children()
    except psutil.NoSuchProcess:
        return []
    found = []
    for child in children:
        with contextlib.suppress(psutil.Error):  # gone meanwhile
            if any("prefect.server.api.server" in part for part in child.cmdline()):
                found.append(child.pid)
    return found

"""Is a TCP port free, and who holds it if not: the servers refuse a taken port at once, naming its holder."""

from __future__ import annotations

import re
import socket
import subprocess


def port_holder(port: int) -> str:
    """Who listens on TCP ``port``, as ``ss`` reports it (``"python3 (pid 123)"``), or ``"another process"``."""
    try:
        out = subprocess.run(["ss", "-Hltnp", f"sport = :{port}"], capture_output=True, text=True, timeout=3).stdout
    except (OSError, subprocess.SubprocessError):
        return "another process"
    found = re.search(r'users:\(\("(?P<name>[^"]+)",pid=(?P<pid>\d+)', out)
    return f"{found['name']} (pid {found['pid']})" if found else "another process"


def check_ports(host: str, ports: dict[str, int]) -> None:
    """Raise ``RuntimeError`` naming each port of ``ports`` (name -> port) that ``host`` cannot bind now."""
    busy = []
    for name, port in ports.items():
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a port in TIME_WAIT is free for the server too
            try:
                s.bind((host, port))
            except OSError:
                busy.append(f"port {port} ({name}) on {host} is in use by {port_holder(port)}")
    if busy:
        raise RuntimeError("; ".join(busy) + ": stop it or choose other ports (--prefect-port / --mlflow-port)")

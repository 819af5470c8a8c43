"""The team's shared services, started for a test as an ops team would: PostgreSQL through `stsreg postgres start`,
an OpenSSH server (the DVC remote's host) on a loopback port with keys the test makes.

Both come from Debian's packages (postgresql, openssh-server). Where they are missing a test that needs them is
skipped, except under ``STSREG_REQUIRE_SERVICES=1`` (set by ``.ci/run``, which installs them): there it fails, so CI
never passes by skipping the team's stack.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import free_port

SSHD = "/usr/sbin/sshd"


def stsreg(*args: str, cwd: Path, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """The installed ``stsreg`` command, run as a user types it (``env`` on top of this process's)."""
    exe = os.path.join(os.path.dirname(sys.executable), "stsreg")
    return subprocess.run([exe, *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def stop_group(proc: subprocess.Popen) -> None:
    """SIGTERM a server's process group (started with start_new_session); SIGKILL it when a loaded machine keeps it
    shutting down past 60 s."""
    import signal

    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)


def have(what: str) -> bool:
    if what == "postgres":
        return bool(glob.glob("/usr/lib/postgresql/*/bin/initdb")) or bool(shutil.which("initdb"))
    if what == "sshd":
        return os.path.exists(SSHD)
    raise ValueError(what)


def _missing(what: tuple[str, ...]) -> list[str]:
    missing = [w for w in what if not have(w)]
    if missing and os.environ.get("STSREG_REQUIRE_SERVICES") == "1":
        pytest.fail(f"STSREG_REQUIRE_SERVICES=1 but {missing} not installed (apt-get install postgresql "
                    "openssh-server)", pytrace=False)
    return missing


def needs(*what: str):
    """A mark: skip without these services, or fail under ``STSREG_REQUIRE_SERVICES=1``."""
    missing = _missing(what)
    return pytest.mark.skipif(bool(missing), reason=f"needs {missing} (apt-get install postgresql openssh-server)")


def require(*what: str) -> None:
    """Inside a test: skip without these services, or fail under ``STSREG_REQUIRE_SERVICES=1``."""
    missing = _missing(what)
    if missing:
        pytest.skip(f"needs {missing} (apt-get install postgresql openssh-server)")


def open_folder(prefix: str) -> Path:
    """A fresh folder under /tmp that every user can reach (as root, PostgreSQL runs as the postgres user, who cannot
    enter pytest's 0700 tmp_path)."""
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    folder.chmod(0o755)
    return folder


@dataclass
class Postgres:
    """A PostgreSQL started by ``stsreg postgres start``: its folder and URL (role stsreg, database stsreg)."""

    folder: Path
    url: str

    def stop(self) -> None:
        stsreg("postgres", "stop", "--dir", self.folder, cwd="/")
        shutil.rmtree(self.folder, ignore_errors=True)


def start_postgres() -> Postgres:
    folder = open_folder("stsreg-pg-")
    run = stsreg("postgres", "start", "--dir", folder, "--port", free_port(), cwd=folder, timeout=120)
    assert run.returncode == 0, run.stderr
    url = next(line for line in run.stdout.splitlines() if line.startswith("postgresql://"))
    return Postgres(folder, url)


@dataclass
class SshServer:
    """sshd on 127.0.0.1:port with a host key and one client key made here; ``url(path)`` is a DVC remote on it."""

    folder: Path
    port: int
    proc: subprocess.Popen

    @property
    def client_key(self) -> Path:
        return self.folder / "client_key"

    def url(self, path: Path) -> str:
        return f"ssh://{pwd.getpwuid(os.getuid()).pw_name}@127.0.0.1:{self.port}{path}"

    def give_key(self, home: Path) -> None:
        """Install the client key as ``home``'s default identity (what a host's ops set-up does): DVC's SSH remote
        finds it there, no path in the project's config."""
        (home / ".ssh").mkdir(parents=True, exist_ok=True, mode=0o700)
        shutil.copy(self.client_key, home / ".ssh/id_ed25519")
        (home / ".ssh/id_ed25519").chmod(0o600)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)
        shutil.rmtree(self.folder, ignore_errors=True)


def start_sshd() -> SshServer:
    folder = open_folder("stsreg-sshd-")
    for key in ("host_key", "client_key"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(folder / key)], check=True)
    shutil.copy(folder / "client_key.pub", folder / "authorized_keys")
    port = free_port()
    (folder / "sshd_config").write_text("\n".join([
        f"Port {port}", "ListenAddress 127.0.0.1", f"HostKey {folder / 'host_key'}",
        f"AuthorizedKeysFile {folder / 'authorized_keys'}", "PasswordAuthentication no",
        "KbdInteractiveAuthentication no", "PermitRootLogin prohibit-password", "UsePAM no",
        f"PidFile {folder / 'sshd.pid'}", "StrictModes no", "Subsystem sftp internal-sftp", ""]))
    if os.geteuid() == 0:
        os.makedirs("/run/sshd", exist_ok=True)  # sshd's privilege-separation folder, made by its service when root
    proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(folder / "sshd_config")],
                            stdout=open(folder / "sshd.log", "w"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 20
    import socket

    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return SshServer(folder, port, proc)
        except OSError:
            assert proc.poll() is None and time.monotonic() < deadline, (folder / "sshd.log").read_text()
            time.sleep(0.2)

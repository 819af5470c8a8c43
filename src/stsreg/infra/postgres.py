"""PostgreSQL for a team's servers: MLflow's backend store and Prefect's API database on one PostgreSQL server.

    stsreg postgres start              # a local PostgreSQL from Debian's package (initdb + pg_ctl); prints its URL
    stsreg servers start --database postgresql://stsreg:PASSWORD@127.0.0.1:5432/stsreg

``--database`` names a database the role can connect to on the server; the two stores are two databases beside it,
``<db>_mlflow`` and ``<db>_prefect`` (created when missing; the role needs CREATEDB, or someone creates them for it).
MLflow's schema is migrated by ``mlflow db upgrade`` before its server starts; Prefect's server migrates its own at
start. Every failure before a server is started is one line: the driver missing, the server refusing connections, a
wrong password, a database that does not exist, a role that may not create databases (:class:`DatabaseError`).

The local server (:class:`LocalPostgres`) keeps everything in one folder: ``data/`` (the cluster), ``password`` (the
``stsreg`` role's, made at ``initdb``), ``postgres.log``. PostgreSQL refuses to run as root, so when root runs the
command the server runs as the ``postgres`` system user that Debian's package creates, and the folder defaults to
``/var/lib/postgresql/stsreg/<project>`` (Debian's home of clusters, which that user can reach) instead of
``.stsreg/postgres`` under the project.
"""

from __future__ import annotations

import glob
import hashlib
import os
import pwd
import secrets
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, urlsplit, urlunsplit

ROLE = "stsreg"
STORES = ("mlflow", "prefect")  #: the databases ``--database`` puts beside the one it names: <db>_mlflow, <db>_prefect
CONNECT_TIMEOUT_S = 5


class DatabaseError(RuntimeError):
    """A database that cannot serve the stores; the message is one line saying why and what to do."""


@dataclass(frozen=True)
class TeamDatabase:
    """The PostgreSQL server a team's MLflow and Prefect servers keep their state on, from its URL
    ``postgresql://USER[:PASSWORD]@HOST[:PORT]/DB``."""

    url: str

    def __post_init__(self):
        parts = urlsplit(self.url)
        if parts.scheme not in ("postgresql", "postgres") or not parts.hostname or not parts.path.strip("/"):
            raise DatabaseError(f"--database {self.redacted}: expected postgresql://USER[:PASSWORD]@HOST[:PORT]/DB")

    def _with(self, scheme: str, database: str) -> str:
        parts = urlsplit(self.url)
        return urlunsplit((scheme, parts.netloc, "/" + database, parts.query, ""))

    @property
    def name(self) -> str:
        return urlsplit(self.url).path.strip("/")

    @property
    def redacted(self) -> str:
        """The URL with its password replaced by ``***`` (what is printed and recorded)."""
        parts = urlsplit(self.url)
        if parts.password is None:
            return self.url
        netloc = parts.netloc.replace(":" + parts.password + "@", ":***@", 1)
        return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))

    def store(self, which: str) -> str:
        """``<db>_mlflow`` (``postgresql://``, psycopg2: MLflow's SQLAlchemy URL) or ``<db>_prefect``
        (``postgresql+asyncpg://``: Prefect's async driver)."""
        scheme = {"mlflow": "postgresql", "prefect": "postgresql+asyncpg"}[which]
        return self._with(scheme, f"{self.name}_{which}")

    def prepare(self) -> None:
        """Connect, create the two store databases where missing, and migrate MLflow's schema; raise
        :class:`DatabaseError` (one line) when any of it cannot be done. Seconds, not minutes: every connection
        gives up after ``CONNECT_TIMEOUT_S``."""
        for module, why in (("psycopg2", "MLflow's"), ("asyncpg", "Prefect's")):
            try:
                __import__(module)
            except ImportError:
                raise DatabaseError(f"{why} PostgreSQL driver is not installed (no module {module}): reinstall the "
                                    "project (make install) from its requirements.lock") from None
        import psycopg2

        with _connected(self.url, self.redacted) as conn:
            conn.autocommit = True  # CREATE DATABASE cannot run inside a transaction
            with conn.cursor() as cur:
                for which in STORES:
                    database = f"{self.name}_{which}"
                    cur.execute("SELECT 1 FROM pg_database WHERE datname = %s", (database,))
                    if cur.fetchone():
                        continue
                    try:
                        cur.execute(f'CREATE DATABASE "{database}"')
                    except psycopg2.errors.InsufficientPrivilege:
                        raise DatabaseError(f"{self.redacted}: role {urlsplit(self.url).username} may not create "
                                            f"databases: create {self.name}_mlflow and {self.name}_prefect for it, or "
                                            "grant it CREATEDB") from None
        upgrade = subprocess.run([sys.executable, "-m", "mlflow", "db", "upgrade", self.store("mlflow")],
                                 capture_output=True, text=True, timeout=300)
        if upgrade.returncode != 0:
            last = (upgrade.stderr.strip().splitlines() or ["(no output)"])[-1]
            raise DatabaseError(f"mlflow db upgrade of {self.name}_mlflow failed: {last}")


class _connected:
    """``with _connected(url, shown):`` a psycopg2 connection, or :class:`DatabaseError` naming the cause."""

    def __init__(self, url: str, shown: str):
        self.url, self.shown = url, shown

    def __enter__(self):
        import psycopg2

        try:
            self.conn = psycopg2.connect(self.url, connect_timeout=CONNECT_TIMEOUT_S)
        except psycopg2.OperationalError as exc:
            raise DatabaseError(f"cannot use the database {self.shown}: {_cause(str(exc))}") from None
        return self.conn

    def __exit__(self, *exc):
        self.conn.close()


def _cause(message: str) -> str:
    """libpq's message (several lines, the server's words) as one line with what to do."""
    text = " ".join(line.strip() for line in message.strip().splitlines() if line.strip())
    if "password authentication failed" in text:
        return "wrong password (password authentication failed)"
    if "does not exist" in text and "database" in text:
        return text.split("FATAL:")[-1].strip() + ": create it, or name one that exists"
    if "Connection refused" in text or "could not connect" in text:
        return "the server refused the connection (is PostgreSQL running on that host and port?)"
    if "timeout expired" in text:
        return f"no answer within {CONNECT_TIMEOUT_S} s (host unreachable?)"
    return text


def check_store_uri(uri: str, name: str) -> None:
    """Before a server is started on ``uri`` (an SQLAlchemy URL), connect to it once: a missing driver, an unknown
    scheme, a refused connection, a wrong password or a missing database is one line now instead of a server that
    never answers its health check. ``postgresql+asyncpg`` is checked with the synchronous driver (same server, same
    credentials) after its own driver's import."""
    import sqlalchemy
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError, OperationalError

    if uri.startswith("postgresql+asyncpg"):
        try:
            import asyncpg  # noqa: F401  (Prefect's driver)
        except ImportError:
            raise DatabaseError(f"{name}: no module asyncpg (Prefect's PostgreSQL driver)") from None
        uri = "postgresql" + uri.removeprefix("postgresql+asyncpg")
    shown = TeamDatabase(uri).redacted if uri.startswith("postgres") else uri
    try:
        engine = sqlalchemy.create_engine(uri, connect_args={"connect_timeout": CONNECT_TIMEOUT_S}
                                          if uri.startswith("postgres") else {})
        with engine.connect():
            pass
    except (ModuleNotFoundError, NoSuchModuleError, ArgumentError) as exc:
        raise DatabaseError(f"{name} cannot open {shown}: {exc} (a driver or scheme SQLAlchemy does not "
                            "have)") from None
    except OperationalError as exc:
        raise DatabaseError(f"{name} cannot open {shown}: {_cause(str(exc.orig))}") from None


# -- the local server ------------------------------------------------------------------------------------------------

def _pg_bin(name: str) -> str:
    """A PostgreSQL server program (``initdb``, ``pg_ctl``): Debian keeps them in /usr/lib/postgresql/N/bin, off
    PATH."""
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), key=lambda p: int(p.split("/")[4]))
    if found:
        return found[-1]
    if shutil.which(name):
        return shutil.which(name)
    raise DatabaseError(f"PostgreSQL is not installed ({name} not found): apt-get install postgresql")


def _as_root() -> bool:
    return os.geteuid() == 0


@dataclass(frozen=True)
class LocalPostgres:
    """A PostgreSQL server the project starts on this machine: its folder, the address it listens on."""

    folder: Path
    host: str = "127.0.0.1"
    port: int = 5432

    @staticmethod
    def default_folder(project: Path) -> Path:
        """``.stsreg/postgres`` under the project; as root, ``/var/lib/postgresql/stsreg/<project name>-<hash>``."""
        project = project.resolve()
        if not _as_root():
            return project / ".stsreg" / "postgres"
        tag = hashlib.sha256(str(project).encode()).hexdigest()[:8]
        return Path("/var/lib/postgresql/stsreg") / f"{project.name}-{tag}"

    @property
    def data(self) -> Path:
        return self.folder / "data"

    @property
    def log(self) -> Path:
        return self.folder / "postgres.log"

    @property
    def password_file(self) -> Path:
        return self.folder / "password"

    @property
    def _options(self) -> str:
        """The server's options for pg_ctl -o: this address, no Unix socket (a long folder path passes its limit)."""
        return f"-p {self.port} -c listen_addresses={self.host} -c unix_socket_directories=''"

    @property
    def address_file(self) -> Path:
        return self.folder / "address"

    @classmethod
    def at(cls, folder: Path) -> "LocalPostgres":
        """The server a ``start`` made in ``folder``, at the address it was started on (``address``: host port)."""
        if not (folder / "address").exists():
            raise DatabaseError(f"no PostgreSQL started by stsreg in {folder}: run `stsreg postgres start` first")
        host, port = (folder / "address").read_text().split()
        return cls(folder, host, int(port))

    def url(self, database: str = ROLE) -> str:
        password = quote(self.password_file.read_text().strip(), safe="")
        return f"postgresql://{ROLE}:{password}@{self.host}:{self.port}/{database}"

    def _run(self, cmd: list[str], timeout: float = 120) -> subprocess.CompletedProcess:
        """Run a server program as the folder's owner: this user, or (root) the ``postgres`` system user."""
        if _as_root():
            # from util-linux, in /usr/sbin: off the PATH of a login shell that is not root's own
            runuser = shutil.which("runuser", path=f"{os.environ.get('PATH', '')}:/usr/sbin:/sbin")
            if not runuser:
                raise DatabaseError("runuser not found (util-linux): needed to run PostgreSQL as the postgres user")
            cmd = [runuser, "-u", "postgres", "--", *cmd]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd="/")

    def _own(self) -> None:
        """As root: hand the folder to ``postgres``, and refuse a folder that user cannot reach (PostgreSQL must)."""
        if not _as_root():
            return
        try:
            user = pwd.getpwnam("postgres")
        except KeyError:
            raise DatabaseError("no `postgres` system user (PostgreSQL refuses to run as root): apt-get install "
                                "postgresql creates it") from None
        for path in (self.folder, *[p for p in self.folder.parents if p.is_dir()]):
            if path != self.folder and not os.stat(path).st_mode & 0o001:
                raise DatabaseError(f"{self.folder}: the postgres user cannot reach it ({path} is closed to others); "
                                    "choose another --dir")
        os.chown(self.folder, user.pw_uid, user.pw_gid)
        for path in self.folder.rglob("*"):
            os.chown(path, user.pw_uid, user.pw_gid)

    def initialised(self) -> bool:
        return (self.data / "PG_VERSION").exists()

    def running(self) -> bool:
        return self.initialised() and self._run([_pg_bin("pg_ctl"), "-D", str(self.data), "status"]).returncode == 0

    def start(self) -> str:
        """initdb on first use (role ``stsreg`` with a generated password, password logins over TCP only, no Unix
        socket), then pg_ctl start on ``host:port`` and the ``stsreg`` database; returns its URL. Idempotent."""
        self.folder.mkdir(parents=True, exist_ok=True)
        if not self.initialised():
            if not self.password_file.exists():
                self.password_file.write_text(secrets.token_urlsafe(18) + "\n")
                self.password_file.chmod(0o600)
            self._own()
            init = self._run([_pg_bin("initdb"), "-D", str(self.data), "-U", ROLE, "--auth=scram-sha-256",
                              f"--pwfile={self.password_file}", "-E", "UTF8", "--locale=C.UTF-8"])
            if init.returncode != 0:
                raise DatabaseError(f"initdb failed: {(init.stderr.strip().splitlines() or ['?'])[-1]}")
        self._own()
        if not self.running():
            started = self._run([_pg_bin("pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-o", self._options,
                                 "-w", "-t", "60", "start"])
            if started.returncode != 0:
                tail = self.log.read_text(errors="replace").strip().splitlines()[-1:] if self.log.exists() else []
                raise DatabaseError(f"PostgreSQL did not start on {self.host}:{self.port}: "
                                    f"{(tail or started.stderr.strip().splitlines() or ['?'])[-1]} (see {self.log})")
        self.address_file.write_text(f"{self.host} {self.port}\n")
        self._create_database()
        return self.url()

    def _create_database(self) -> None:
        with _connected(self.url("postgres"), f"{self.host}:{self.port}/postgres") as conn:
            conn.autocommit = True
            with conn.cursor() as cur:
                cur.execute("SELECT 1 FROM pg_database WHERE datname = %s", (ROLE,))
                if not cur.fetchone():
                    cur.execute(f'CREATE DATABASE "{ROLE}"')

    def stop(self) -> bool:
        """pg_ctl stop (fast: open sessions are ended); whether a server was running."""
        if not self.running():
            return False
        done = self._run([_pg_bin("pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "-t", "60", "stop"])
        if done.returncode != 0:
            raise DatabaseError(f"pg_ctl stop failed: {(done.stderr.strip().splitlines() or ['?'])[-1]}")
        return True

    def restart(self) -> None:
        """pg_ctl restart with the same address (what a database administrator's restart looks like to clients)."""
        done = self._run([_pg_bin("pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-o", self._options,
                          "-m", "fast", "-w", "-t", "60", "restart"])
        if done.returncode != 0:
            raise DatabaseError(f"pg_ctl restart failed: {(done.stderr.strip().splitlines() or ['?'])[-1]}")

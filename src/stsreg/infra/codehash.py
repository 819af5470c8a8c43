"""What code a stage runs: the import closure of its entry modules within ``stsreg`` and ``pipelines``.

Used twice, so that staleness can be trusted: ``tests/unit/test_dvc_deps.py`` asserts that ``dvc.yaml`` lists
every file of each stage's closure as a dependency, and the resumable experiments (``compare`` runs,
``profile`` points) put :func:`code_hash` of their closure in their fingerprints, so a code change reruns
them instead of reusing stale results. Imports inside functions count (the CLI and flows import lazily).
The keys hash each file's syntax, not its path (:func:`source_key`): moving modules between folders keeps them.

    >>> sorted({p.name for p in import_closure(["stsreg.product.data.sources"])} - {"__init__.py"})
    ['atomic.py', 'config.py', 'errors.py', 'hashing.py', 'sources.py']
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Iterable

from stsreg.infra.hashing import fingerprint

#: Top-level packages whose modules count as the project's code.
PACKAGES = ("stsreg", "pipelines")

#: The modules each DVC stage's command runs (the CLI verb calls into these); ``dvc.yaml`` lists their closure.
STAGE_ENTRIES = {
    "fetch": ("stsreg.product.data.sources",),
    "prepare": ("stsreg.product.data.prepare",),
    "stage1": ("pipelines.product.stage1_flow",),
    "stage2": ("pipelines.product.stage2_flow",),
    "evaluate": ("pipelines.product.release_flow",),
    "register": ("pipelines.product.release_flow",),
    "promote": ("pipelines.product.release_flow",),
    "compare": ("pipelines.experiments.compare_flow",),
    "search": ("pipelines.experiments.search_flow",),
    "profile": ("pipelines.experiments.profile_flow",),
    "claims": ("stsreg.experiments.claims",),
    "nli_table": ("pipelines.experiments.nli_table_flow",),
    "baselines": ("pipelines.experiments.baselines_flow",),
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


class _Canonical(ast.NodeTransformer):
    """A module's syntax with its project imports reduced to the names they bind: where a module lives is not code."""

    def visit_ImportFrom(self, node: ast.ImportFrom) -> ast.AST:
        if node.level or not node.module or node.module.split(".")[0] not in PACKAGES:
            return node
        return ast.Import(names=[ast.alias(a.name, a.asname) for a in node.names])  # `from x.y import a` -> `import a`

    def visit_Import(self, node: ast.Import) -> ast.AST:
        return ast.Import(names=[ast.alias(a.name.rsplit(".", 1)[-1] if a.name.split(".")[0] in PACKAGES else a.name,
                                           a.asname) for a in node.names])


def source_key(path: Path) -> str:
    """sha256 of a file's syntax tree with project imports reduced to the names they bind: the same for a module
    moved to another folder (its importers' ``from a.b import m`` rewritten to ``from c import m``) and for
    comments or formatting; different when any statement, name or docstring changes."""
    tree = _Canonical().visit(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
    return hashlib.sha256(ast.dump(tree, annotate_fields=False).encode()).hexdigest()


#: Code left out of every code key because every run key holds what it resolves to: the settings (params.yaml's
#: sections, defaults, help and validation: the keys hold the values), the experiments' declared rows (a comparison
#: row's key holds its recipe, an NLI row's its kind: a new row retrains no other) and this module (how keys are
#: made). A new section or row, a reworded help text or a validation rule retrains nothing.
KEYLESS = ("stsreg.infra.config", "stsreg.infra.knobs", "stsreg.infra.settings_data", "stsreg.infra.settings_training",
           "stsreg.infra.settings_experiments", "stsreg.infra.settings_operations", "stsreg.infra.method_specs",
           "stsreg.infra.codehash")


def code_hash(roots: Iterable[str], exclude: Iterable[str] = ()) -> str:
    """sha256 (16 hex) over the :func:`source_key` of every file of the closure, in sorted order and without their
    paths: changes when any of that code changes, not when files move. A renamed module changes the key of the
    code that names it. ``exclude``: modules left out of the hash besides :data:`KEYLESS` (their imports still
    count)."""
    skipped = {_origin(m) for m in (*exclude, *KEYLESS)}
    keys = sorted(source_key(path) for path in import_closure(roots) if path not in skipped)
    return hashlib.sha256("\n".join(keys).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class RowKey:
    """What a resumable run's results depend on (a comparison row, an NLI-table row, a baseline system): ``parts`` (its
    settings, seed and data digests; JSON-able) and the code it runs (``code``: entry modules, hashed with their import
    closure by :func:`code_hash`). Kept here, in no key itself, so that where rows are stored is not part of them."""

    parts: dict
    code: tuple[str, ...]

    @cached_property  # asked up to four times a row (done?, MLflow tag, key folder, marker): the closure hashed once
    def fingerprint(self) -> str:
        """What a rerun matches: sha256 (16 hex) of the parts with the code's hash as part ``code``."""
        return fingerprint({**self.parts, "code": code_hash(self.code)})

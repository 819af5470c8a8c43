"""``python -m tests.golden.recommit`` (``make recommit``): record with ``dvc commit`` only what the golden run proves.

A stage whose dependencies changed is recorded without rerunning it only when every change is **code that a golden
case of that stage runs** (:data:`tests.golden.cases.STAGES`) and the golden run holds: then the stage's outputs are
what the new code would compute. Anything else is refused, per stage, with the ``dvc repro`` to run instead:

- a changed parameter (``params.yaml``) or data file: the stage never saw it;
- a changed output (missing, or not the one recorded): nothing to vouch for;
- changed code that no golden case of the stage calls (a function, or a module's own statements), or a stage with no
  golden case: golden proves nothing about it.

What "changed code" means: the recorded version of a file is the one in git at the last commit of ``dvc.lock`` (its
MD5 checked against the lock), else the newest earlier version with the lock's MD5 (a stage kept while another was
re-recorded); both versions are parsed, and a function (by its qualified name, as Python's code objects name it)
changed when its syntax tree did; the module's own statements (imports, constants, class bodies,
signatures) changed when the module's tree without function bodies did. Comments, docstrings and formatting change no
tree (docstrings are left out of it), so they need no proof. Golden runs in a fresh process
(``python -m tests.golden --calls``) so that what importing the project runs (module statements, settings built from
the declarations) is traced too, and counts for every case. An output or data file absent from this checkout (a clone
without the DVC cache) is neither changed nor recorded anew: its recorded hash stays, and only the code's hashes move.
Refusing writes nothing: no ``dvc.lock``, no row re-keyed. Exit 0 recorded (or nothing to record), 1 refused."""

from __future__ import annotations

import ast
import hashlib
import json
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from tests.golden import __main__ as golden  # first: it pins the kernels before anything imports torch
from tests.golden import cases as golden_cases

#: Files whose changes are code (and so can be proven by golden); every other dependency is data.
CODE_SUFFIXES = (".py",)


@dataclass
class Verdict:
    """Per stage: ``refusals`` (why it cannot be recorded, each with the command to run), ``units`` (the changed
    code: ``(file, qualified name)`` that golden must have run)."""
    stage: str
    refusals: list[str] = field(default_factory=list)
    units: set[tuple[str, str]] = field(default_factory=set)


def _no_docstrings(tree: ast.AST) -> ast.AST:
    """``tree`` without its docstrings (the module's, each class's and function's): words, not behaviour."""
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body
                and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            node.body = body[1:] or [ast.Pass()]
    return tree


def _strip(tree: ast.AST) -> str:
    """The module's own statements: its tree with every function body emptied."""
    class Strip(ast.NodeTransformer):
        def visit_FunctionDef(self, node):
            return ast.copy_location(type(node)(**{**{f: getattr(node, f) for f in node._fields},
                                                   "body": [ast.Pass()]}), node)
        visit_AsyncFunctionDef = visit_FunctionDef

    return ast.dump(Strip().visit(tree))


def functions(source: str) -> dict[str, str]:
    """``{qualified name: dump of its tree}`` of every function (methods ``Class.f``, nested ``f.<locals>.g``), and
    ``<module>``: the module's own statements."""
    tree = _no_docstrings(ast.parse(source))
    out = {}

    def visit(node, prefix: str):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out[prefix + child.name] = ast.dump(child)
                visit(child, f"{prefix}{child.name}.<locals>.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(tree, "")
    out["<module>"] = _strip(tree)  # after the functions' dumps: stripping rewrites the tree in place
    return out


def changed_units(old: str, new: str) -> set[str]:
    """The functions (and ``<module>``) whose trees differ between two versions of a file; removed functions count
    as a change of the module."""
    a, b = functions(old) if old else {}, functions(new)
    moved = {name for name, tree in b.items() if a.get(name) != tree}
    return moved | ({"<module>"} if set(a) - set(b) else set())


def lock_commit(project: Path) -> str:
    """The last commit of ``dvc.lock`` (empty when it was never committed)."""
    return subprocess.run(["git", "log", "-1", "--format=%H", "--", "dvc.lock"], cwd=project, capture_output=True,
                          text=True).stdout.strip()


def recorded_source(project: Path, rev: str, path: str, md5: str | None) -> str | None:
    """The file as ``dvc.lock`` recorded it: its version at the lock's last commit ``rev`` if the MD5 agrees, else
    the newest version before ``rev`` whose MD5 is the recorded one (a stage the lock kept while another was
    re-recorded by ``dvc repro`` since, its files committed then); None where git has no such version."""
    if not rev:
        return None
    revisions = [rev]
    if md5:  # the commits that changed the file, newest first: each holds one version of it
        revisions += subprocess.run(["git", "log", "--format=%H", rev, "--", path], cwd=project, capture_output=True,
                                    text=True).stdout.split()
    for revision in dict.fromkeys(revisions):  # rev itself, when it changed the file, is shown once
        shown = subprocess.run(["git", "show", f"{revision}:{path}"], cwd=project, capture_output=True)
        if shown.returncode == 0 and (not md5 or hashlib.md5(shown.stdout).hexdigest() == md5):
            return shown.stdout.decode("utf-8")
    return None


def judge(project: Path) -> list[Verdict]:
    """What ``dvc status`` says changed, sorted into refusals and code units to prove, per changed stage."""
    from dvc.repo import Repo

    with Repo(str(project)) as repo:
        status = repo.status()
    lock = yaml.safe_load((project / "dvc.lock").read_text()) if (project / "dvc.lock").exists() else {}
    rev = lock_commit(project)
    verdicts = []
    for stage, entries in status.items():
        v = Verdict(stage)
        repro = f"dvc repro {stage}"
        recorded = {d["path"]: d.get("md5") for d in lock.get("stages", {}).get(stage, {}).get("deps", [])}
        for entry in entries:
            if not isinstance(entry, dict):  # "always changed", "changed command", ...
                v.refusals.append(f"{entry} -> {repro}")
                continue
            for path, state in entry.get("changed outs", {}).items():
                if not (project / path).exists():
                    continue  # absent from this checkout (no DVC cache): its record is kept as it is
                v.refusals.append(f"output {path} {state}: nothing recorded to vouch for -> {repro} (or dvc pull)")
            for path, state in entry.get("changed deps", {}).items():
                if isinstance(state, dict):  # a params file: {key: modified/new/deleted}
                    v.refusals += [f"param {key} {how}: the stage never ran with it -> {repro}"
                                   for key, how in sorted(state.items())]
                elif not (project / path).exists() and not path.endswith(CODE_SUFFIXES):
                    continue  # data absent from this checkout: its record is kept as it is
                elif not path.endswith(CODE_SUFFIXES):
                    v.refusals.append(f"data {path} {state}: not what the stage ran on -> {repro}")
                elif state == "deleted" and not (project / path).exists():
                    continue  # code the stage no longer runs: golden proves what runs instead
                else:
                    # a file new to the stage's deps (no entry in dvc.lock) is all new code, to be proven like any
                    old = "" if state == "new" or path not in recorded else recorded_source(project, rev, path,
                                                                                             recorded[path])
                    if old is None:
                        v.refusals.append(f"code {path}: its recorded version (its MD5 in dvc.lock) is in none of "
                                          f"its commits -> {repro}")
                        continue
                    v.units |= {(path, unit) for unit in changed_units(old, (project / path).read_text())}
        if v.units and not cases_of(stage):
            v.refusals.append(f"code {sorted({p for p, _ in v.units})} changed and no golden case runs this stage -> "
                              f"{repro}")
        verdicts.append(v)
    return verdicts


def cases_of(stage: str) -> tuple[str, ...]:
    """The golden cases of a stage (a ``foreach`` stage ``name@item`` is its ``name``'s)."""
    return tuple(golden_cases.STAGES.get(stage.split("@")[0], ()))


def unproven(verdict: Verdict, cases: tuple[str, ...], calls: dict[str, set[tuple[str, str]]],
             project: Path) -> list[str]:
    """The changed units of ``verdict`` that no golden case of its stage called (files named from ``project``)."""
    root = project.resolve()

    def relative(f: str) -> str:
        resolved = Path(f).resolve()
        return str(resolved.relative_to(root)) if resolved.is_relative_to(root) else f

    ran = {(relative(f), q) for case in cases for f, q in calls.get(case, ())}
    return sorted(f"{path}: {unit}" for path, unit in verdict.units if (path, unit) not in ran)


def record(project: Path, stages: list[str]) -> None:
    """``dvc commit -f`` of ``stages``, keeping the record of what this checkout lacks (DVC's ``allow_missing``):
    on a clone without the DVC cache the new code hashes are written and every absent output or data file keeps the
    hash it had, which the golden run vouches for."""
    from dvc.repo import Repo

    with Repo(str(project)) as repo:
        for stage in stages:
            repo.commit(stage, force=True, allow_missing=True)


def golden_run(project: Path, cases: list[str]) -> tuple[dict[str, set[tuple[str, str]]], list[str]]:
    """``cases`` run in a fresh process (``python -m tests.golden --calls``), so that what importing the project runs
    is traced too: (what each case ran, the outputs that moved)."""
    with tempfile.TemporaryDirectory(prefix="golden-calls-") as tmp:
        out = Path(tmp) / "calls.json"
        run = subprocess.run([sys.executable, "-m", "tests.golden", *cases, "--calls", str(out)], cwd=project)
        if not out.is_file():
            raise SystemExit(f"recommit: the golden run failed (exit {run.returncode}); nothing recorded")
        found = json.loads(out.read_text())
    return {c: {tuple(u) for u in units} for c, units in found["calls"].items()}, found["moved"]


def main(project: Path = Path(".")) -> int:
    verdicts = [v for v in judge(project) if v.refusals or v.units]
    if not verdicts:
        print("recommit: dvc status is clean: nothing to record")
        return 0
    proving = [v for v in verdicts if not v.refusals]
    cases = sorted({c for v in proving for c in cases_of(v.stage)}, key=list(golden_cases.CASES).index)
    calls, moved = golden_run(project, cases) if cases else ({}, [])
    for v in proving:
        # a moved output refuses the stages whose cases it belongs to ("case: output: moved ...")
        seen = [line for line in moved if line.split(":", 1)[0] in cases_of(v.stage)]
        v.refusals += [f"golden moved {line}: a behaviour change -> dvc repro {v.stage}" for line in seen]
        if not seen:
            v.refusals += [f"code {u} runs in no golden case of the stage {list(cases_of(v.stage))} -> "
                           f"dvc repro {v.stage}" for u in unproven(v, cases_of(v.stage), calls, project)]
    refused = [v for v in verdicts if v.refusals]
    if refused:
        print("recommit: REFUSED, nothing recorded (dvc.lock and the rows are as they were):")
        for v in refused:
            print(f"  {v.stage}:")
            for line in v.refusals:
                print(f"    {line}")
        return 1
    names = [v.stage for v in verdicts]
    print(f"recommit: golden proves {', '.join(names)}: recording with dvc commit")
    record(project, names)
    subprocess.run([sys.executable, "-m", "stsreg.experiments.row_results", "reports"], cwd=project, check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

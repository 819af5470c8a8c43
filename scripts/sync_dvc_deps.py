"""Write each stage's code deps in dvc.yaml from its import closure (what tests/unit/test_dvc_deps.py checks).

    python scripts/sync_dvc_deps.py          # edit dvc.yaml in place, keeping its comments and order; print changes
    python scripts/sync_dvc_deps.py --check  # exit 1 if a stage's deps differ, changing nothing

After a module is added, moved or newly imported, this rewrites the `src/` and `pipelines/` lines of each stage's
deps; `dvc status` then lists the stages whose code changed, and `make golden` tells whether `dvc commit` records
them or they rerun (docs/architecture.md, "How to change shared code").
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CODE_DEP = re.compile(r"^(\s+)- ((?:src|pipelines)/\S+\.py)\s*$")
STAGE = re.compile(r"^  ([a-z_0-9]+):\s*$")


def closures() -> dict[str, list[str]]:
    """stage -> the sorted repository paths of its entry modules' import closure."""
    sys.path[:0] = [str(REPO / "src"), str(REPO)]
    from stsreg.experiments import backbone_compare, backbone_search
    from stsreg.infra import codehash

    entries = {**codehash.STAGE_ENTRIES, backbone_compare.DVC_STAGE: backbone_compare.STAGE_ENTRIES,
               backbone_search.DVC_STAGE: backbone_search.STAGE_ENTRIES}
    return {stage: sorted(os.path.relpath(p, REPO) for p in codehash.import_closure(roots))
            for stage, roots in entries.items()}


def synced(lines: list[str], wanted: dict[str, list[str]]) -> tuple[list[str], list[str]]:
    """dvc.yaml's lines with each known stage's code deps replaced by ``wanted`` (written where the first code dep
    was, in sorted order); and one line per stage that changed."""
    starts = [(i, m.group(1)) for i, line in enumerate(lines) if (m := STAGE.match(line))] + [(len(lines), "")]
    out, changes, done = [], [], 0
    for (start, name), (end, _) in zip(starts, starts[1:]):
        out += lines[done:start]
        block = lines[start:end]
        code = [(j, CODE_DEP.match(line)) for j, line in enumerate(block) if CODE_DEP.match(line)]
        if name in wanted and code:
            have = [m.group(2) for _, m in code]
            if have != wanted[name]:
                added, gone = sorted(set(wanted[name]) - set(have)), sorted(set(have) - set(wanted[name]))
                changes.append(f"{name}: +{added} -{gone}" if added or gone else f"{name}: sorted")
            indent, first = code[0][1].group(1), code[0][0]
            kept = [line for j, line in enumerate(block) if not CODE_DEP.match(line) or j == first]
            at = kept.index(block[first])
            block = kept[:at] + [f"{indent}- {path}" for path in wanted[name]] + kept[at + 1:]
        out += block
        done = end
    return out + lines[done:], changes


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="report differences, write nothing")
    args = ap.parse_args(argv)
    path = REPO / "dvc.yaml"
    lines = path.read_text().split("\n")
    new, changes = synced(lines, closures())
    for change in changes:
        print(change)
    if args.check:
        return 1 if changes else 0
    if changes:
        path.write_text("\n".join(new))
    return 0


if __name__ == "__main__":
    sys.exit(main())

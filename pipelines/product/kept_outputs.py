"""What a stopped stage leaves behind. Every output of the product chain is declared ``persist: true`` in dvc.yaml,
so DVC leaves it in place while its stage runs (it deletes other outputs first), and each stage swaps its outputs
in whole only when it succeeds (:mod:`stsreg.infra.atomic`): a cancelled or failed stage leaves the outputs of its
last finished run, the ones ``dvc.lock`` records. :func:`kept` says so, naming them, for the run's log and error."""

from __future__ import annotations

from pathlib import Path

import yaml


def outputs(project: Path, stage: str) -> list[tuple[str, bool]]:
    """``(path, persists)`` of every output (outs, metrics, plots) of ``stage`` in the project's dvc.yaml."""
    spec = yaml.safe_load((Path(project) / "dvc.yaml").read_text(encoding="utf-8"))["stages"].get(stage) or {}
    found = []
    for kind in ("outs", "metrics", "plots"):
        for out in spec.get(kind) or []:
            path, opts = (out, {}) if isinstance(out, str) else next(iter(out.items()))
            found.append((path, bool((opts or {}).get("persist"))))
    return found


def kept(project: Path, stage: str) -> str:
    """One sentence: ``stage`` stopped before its end, and which of its outputs are still its last finished run's
    (those that persist and exist), which it never made, and which DVC removed (those that do not persist)."""
    outs = outputs(project, stage)
    here = [p for p, persists in outs if persists and (Path(project) / p).exists()]
    never = [p for p, persists in outs if persists and not (Path(project) / p).exists()]
    removed = [p for p, persists in outs if not persists]
    parts = [f"stage {stage} stopped before its end: "
             + (f"the outputs of its last finished run are kept ({', '.join(here)})" if here else "no earlier outputs")]
    if never:
        parts.append(f"never made before: {', '.join(never)}")
    if removed:
        parts.append(f"removed by DVC when the stage started (not persist): {', '.join(removed)}")
    return "; ".join(parts)

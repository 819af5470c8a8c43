"""What ``prepare`` writes about the rows it did not keep as they were, and its refusal when a dataset rejects too many.

- ``<dataset>.parquet``: rejected rows (dataset, split, file, line, reason, raw);
- ``duplicates.parquet``: every later copy of a pair already seen in its split (dataset, split, file, line,
  first_line of the kept copy, rejected: whether ``prepare.duplicate_pairs: reject`` dropped it).

A run that refuses (:func:`check_rejected_fraction`) writes them to ``<rejected>.refused/`` instead and replaces
nothing, so the previous tables and metrics stay what they were.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from stsreg.infra import atomic
from stsreg.infra.errors import InputError


class PrepareError(InputError):
    """Raised when a dataset rejects more rows than ``prepare.max_rejected_fraction`` allows."""


def refused_dir(rejected_dir: Path) -> Path:
    """Where a refused run's rejects go, beside the rejects folder it leaves untouched."""
    return rejected_dir.with_name(rejected_dir.name + ".refused")


def write_rejects(folder: Path, rejects: dict[str, pd.DataFrame], duplicates: pd.DataFrame) -> None:
    """``<dataset>.parquet`` (rejected rows with file, line, reason, raw) and ``duplicates.parquet`` in ``folder``."""
    for name, frame in rejects.items():
        frame.to_parquet(folder / f"{name}.parquet", index=False)
    duplicates.to_parquet(folder / DUPLICATES, index=False)


#: Every duplicate pair found (dataset, split, file, line, first_line, rejected), beside the rejects.
DUPLICATES = "duplicates.parquet"


def check_rejected_fraction(datasets: dict[str, dict], limit: float, rejects: dict[str, pd.DataFrame],
                             duplicates: pd.DataFrame, aside: Path) -> None:
    """Raise :class:`PrepareError` naming every dataset that rejected more than ``limit`` of its rows, after writing
    the rejects to ``aside`` (replaced whole) so that the message can point at each row's file, line and reason."""
    over = {n: d for n, d in datasets.items() if d["rejected_fraction"] > limit}
    if over:
        with atomic.staged_dir(aside) as staged:
            write_rejects(staged, rejects, duplicates)
        lines = [f"{len(over)} dataset(s) rejected more than prepare.max_rejected_fraction={limit}; nothing was "
                 "replaced (the previous prepared tables and metrics stay as they were):"]
        for name, d in over.items():
            lines.append(f"  - {name}: {d['rejected']} of {d['read']} rows ({d['rejected_fraction']:.2%}); "
                         f"see {aside / (name + '.parquet')} for file, line and reason of each")
        raise PrepareError("\n".join(lines))

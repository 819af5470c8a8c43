"""The table ``make bench-learn`` feeds in rounds (:mod:`benchmarks.learn`): the worked example's ``qa`` rows split into
a first part and arrivals, and the fixed test pairs every round is scored on."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from benchmarks.loop_project import NEW_ROWS, QA

#: The first part of the table (what round 1 declared), kept beside the projects.
FIRST = "first_part.jsonl"


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _write_rows(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")


def arrivals(base: Path, project: Path, first: float, n: int) -> list[Path]:
    """Split the example's 1,588 rows (its table and the rows that arrive later, in the example's shuffled order):
    the first ``first`` of them stay the declared table (and :data:`FIRST` keeps them), the rest become ``n`` files
    ``arrival_1..n.jsonl`` in ``base`` (returned)."""
    table = project / QA["file"]
    rows = _rows(table) + _rows(project.parent / NEW_ROWS)
    head = round(len(rows) * first)
    _write_rows(table, rows[:head])
    _write_rows(base / FIRST, rows[:head])
    rest, files = rows[head:], []
    for i in range(n):
        files.append(base / f"arrival_{i + 1}.jsonl")
        _write_rows(files[-1], rest[i * len(rest) // n:(i + 1) * len(rest) // n])
    return files


def arrival_files(base: Path) -> list[Path]:
    return sorted(base.glob("arrival_*.jsonl"), key=lambda p: int(p.stem.split("_")[1]))


def fixed_test_pairs(base: Path) -> pd.DataFrame:
    """The ``qa`` rows of the whole table (:data:`FIRST` and every arrival in ``base``) that its stable hash puts in
    the test split: the same pairs in every round, never trained on. Columns sentence1, sentence2, score (0-1)."""
    from stsreg.product.data.user_tables import hash_split

    rows = pd.DataFrame(_rows(base / FIRST) + [r for f in arrival_files(base) for r in _rows(f)])
    rows = rows.rename(columns={"text_a": "sentence1", "text_b": "sentence2", "similarity": "score"})
    split = hash_split(rows.sentence1, rows.sentence2, QA["dev_fraction"], QA["test_fraction"])
    test = rows[split == "test"].reset_index(drop=True)
    return test.assign(sentence1=test.sentence1.str.strip(), sentence2=test.sentence2.str.strip())

"""The tables ``make bench-learn`` feeds in rounds (:mod:`benchmarks.learn`), declared in :data:`TABLES`: each split
into a first part and arrivals, with the fixed test pairs every round is scored on.

- ``qa``: the worked example's 1,588 question/answer pairs (docs/own_data.md); its test pairs are the 383 its stable
  hash puts in test, so a round's interval is some 10 points wide.
- ``sick``: SICK-R's relatedness pairs (SemEval-2014 Task 1, from the data mirror) as a table of the user's own: held
  out of the public training tables (``stage2.train_tables: [stsb, sick]``), its train pairs arriving in rounds, its
  dev split selecting, and its official test split (4,927 pairs) scoring every round: an interval about a point wide,
  on a table where data matters to the backbone.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Callable

import pandas as pd
import yaml

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


#: The SICK table of :data:`TABLES` as a user declares it: a split column, the 1-5 scale kept as annotated.
SICK = {"name": "sick", "file": "data/tables/sick_pairs.jsonl", "columns": {"split": "split"}, "scale": [1, 5],
        "rescale": False, "d": 1}
SICK_FILES = {"train": "SICK_train.txt", "dev": "SICK_trial.txt", "test": "SICK_test_annotated.txt"}
SICK_TEST = "sick_test.jsonl"


def _sick_splits(mirror: Path) -> dict[str, pd.DataFrame]:
    """SICK's three SemEval files as sentence1, sentence2, score (1-5), split; a pair in two splits is kept in the
    later one only (test over dev over train: 49 train pairs and 5 dev pairs are also test pairs, 3 train pairs dev
    pairs), as a declared table may not hold a pair in train and test."""
    out, later = {}, set()
    for split in ("test", "dev", "train"):
        raw = pd.read_csv(mirror / "SICK" / SICK_FILES[split], sep="\t")
        df = pd.DataFrame({"sentence1": raw.sentence_A.str.strip(), "sentence2": raw.sentence_B.str.strip(),
                           "score": raw.relatedness_score.astype(float), "split": split})
        keys = list(zip(df.sentence1, df.sentence2))
        out[split] = df[[k not in later for k in keys]].reset_index(drop=True)
        later |= set(keys)
    return out


def sick_arrivals(base: Path, project: Path, first: float, n: int) -> list[Path]:
    """Declare SICK as the project's ``sick`` table: the first ``first`` of its train pairs (shuffled with seed 0)
    with all its dev and test pairs; the other train pairs become ``n`` files ``arrival_1..n.jsonl`` in ``base``
    (returned); the test pairs are kept as :data:`SICK_TEST` beside them. ``stage2.train_tables`` becomes ``[stsb,
    sick]`` (SICK-R's public reader stays in the evaluation, not in training) and ``stage2.dev_table`` ``sick``."""
    params = yaml.safe_load((project / "params.yaml").read_text(encoding="utf-8"))
    splits = _sick_splits(Path(params["fetch"]["mirror"]))
    train = splits["train"].sample(frac=1.0, random_state=0).reset_index(drop=True)
    head = round(len(train) * first)
    rows = lambda df: df.to_dict(orient="records")  # noqa: E731
    _write_rows(project / SICK["file"], rows(train[:head]) + rows(splits["dev"]) + rows(splits["test"]))
    _write_rows(base / SICK_TEST, rows(splits["test"]))
    params["prepare"]["sts_tables"] = [t for t in params["prepare"]["sts_tables"] if t["name"] != "sick"] + [SICK]
    params["stage2"].update(train_tables=["stsb", "sick"], dev_table="sick")
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    rest, files = train[head:], []
    for i in range(n):
        files.append(base / f"arrival_{i + 1}.jsonl")
        _write_rows(files[-1], rows(rest[i * len(rest) // n:(i + 1) * len(rest) // n]))
    return files


def sick_test_pairs(base: Path) -> pd.DataFrame:
    """SICK's official test pairs (4,927 less none: the test split keeps every pair), columns sentence1, sentence2,
    score (1-5)."""
    return pd.DataFrame(_rows(base / SICK_TEST))


@dataclasses.dataclass(frozen=True)
class LearnTable:
    """A table fed in rounds: its ``name`` (in ``prepare.sts_tables`` and ``stsreg data add --table``), words for the
    report (``about``), the ``gate`` of every round after the first (params, dotted), ``arrivals`` (base, project,
    first, n) -> the arrival files (declares the first part in the project) and ``test_pairs`` (base) -> the fixed
    pairs every round is scored on (sentence1, sentence2, score)."""

    name: str
    about: str
    gate: dict
    arrivals: Callable[[Path, Path, float, int], list[Path]]
    test_pairs: Callable[[Path], pd.DataFrame]


TABLES = {
    "qa": LearnTable("qa", "The worked example's `qa` table (docs/own_data.md, 1,588 question/answer pairs)",
                     {"promote.metrics": ["qa"], "promote.guards": {"avg7": 0.3},
                      "promote.unseen_only": True}, arrivals, fixed_test_pairs),
    "sick": LearnTable("sick", "SICK-R's relatedness pairs as a table of the user's own (`sick`: held out of the "
                               "public training tables; its train pairs arrive, its dev split selects, its official "
                               "test split scores)",
                       {"promote.metrics": ["sick"], "promote.guards": {"avg7": 0.3}, "promote.unseen_only": False},
                       sick_arrivals, sick_test_pairs),
}

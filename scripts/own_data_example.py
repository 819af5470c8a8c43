"""Build the worked example of docs/own_data.md: a table of your own, in a format, column names and scale the public
readers do not take.

From the raw STS files of the data mirror (``fetch.mirror``, or ``--mirror``) it takes the question-and-answer pairs
(STS 2015 answers-forums and answers-students, STS 2016 answer-answer and question-question: 1,588 scored pairs),
rescales their 0-5 gold scores to 0-1, and writes them as JSON lines with the columns ``text_a``, ``text_b`` and
``similarity``:

- ``data/tables/qa_pairs.jsonl``: 80% of the pairs (a shuffle with a fixed seed), the table you declare;
- ``qa_new_rows.jsonl``: the other 20%, the rows that "arrive later" (``stsreg data add qa_new_rows.jsonl --table qa``).

These pairs are also test pairs of the public STS15 and STS16 tasks, so the example shows the leakage marking too:
the pairs of the table's train split are *seen* in STS15/STS16 and the unseen view leaves them out.

Usage: ``python scripts/own_data_example.py [--mirror ../shared/data] [--out data/tables/qa_pairs.jsonl]
[--new qa_new_rows.jsonl]``
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

#: (folder, input file, gold file) of each subset taken; the input's first two tab-separated fields are the pair.
SUBSETS = (
    ("STS15", "STS.input.answers-forums.txt", "STS.gs.answers-forums.txt"),
    ("STS15", "STS.input.answers-students.txt", "STS.gs.answers-students.txt"),
    ("STS16", "STS2016.input.answer-answer.txt", "STS2016.gs.answer-answer.txt"),
    ("STS16", "STS2016.input.question-question.txt", "STS2016.gs.question-question.txt"),
)
NEW_FRACTION = 0.2
SEED = 7


def scored_pairs(mirror: Path) -> list[dict]:
    """Every scored pair of :data:`SUBSETS` as {text_a, text_b, similarity (0-1)}; unscored lines (blank gold)
    skipped."""
    rows = []
    missing = [str(mirror / folder / name) for folder, inp, gold in SUBSETS for name in (inp, gold)
               if not (mirror / folder / name).is_file()]
    if missing:
        raise SystemExit(f"no STS15/STS16 raw files under {mirror} ({len(missing)} missing, e.g. {missing[0]}): pass "
                         "--mirror PATH, the data mirror that holds STS15/ and STS16/ (fetch.mirror in params.yaml), "
                         "or run `dvc repro fetch` and pass --mirror data/raw")
    for folder, inp, gold in SUBSETS:
        pairs = (mirror / folder / inp).read_text(encoding="utf-8").splitlines()
        scores = (mirror / folder / gold).read_text(encoding="utf-8").splitlines()
        if len(pairs) != len(scores):
            raise SystemExit(f"{mirror / folder / inp}: {len(pairs)} lines but {len(scores)} gold lines")
        for pair, score in zip(pairs, scores):
            if score.strip():
                a, b = pair.split("\t")[:2]
                rows.append({"text_a": a, "text_b": b, "similarity": round(float(score) / 5.0, 4)})
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mirror", type=Path, default=Path("../shared/data"), help="the raw data mirror")
    ap.add_argument("--out", type=Path, default=Path("data/tables/qa_pairs.jsonl"), help="the table to declare")
    ap.add_argument("--new", type=Path, default=Path("qa_new_rows.jsonl"), help="the rows to add later")
    args = ap.parse_args(argv)
    rows = scored_pairs(args.mirror)
    random.Random(SEED).shuffle(rows)
    n_new = round(len(rows) * NEW_FRACTION)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    for path, part in ((args.out, rows[n_new:]), (args.new, rows[:n_new])):
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in part), encoding="utf-8")
        print(f"{path}: {len(part)} pairs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""One reader per raw file format. Readers parse, they do not judge content.

Each reader returns a :class:`Parsed`: ``rows`` (one dict per record, every field still a string, with
its provenance ``file`` and 1-based physical ``line``), ``rejects`` (records whose *structure* is
broken — wrong field count, unreadable quoting — with file, line, reason and the raw text) and
``skipped`` (records that are absent by design, e.g. unscored STS15/16 pairs with a blank gold line).
Content checks (empty sentences, score range, labels, duplicates) happen in :mod:`stsreg.data.schemas`.

STS row keys: ``subset, sentence1, sentence2, score``. NLI row keys: ``premise, hypothesis, label``.
``file`` is the path relative to the raw root so that rejects point at the file a user can open.

Format quirks handled here (see the data MANIFEST):
- STS Benchmark: TAB-separated, no header, quoting OFF (it has unbalanced ``"``), 7 or 9 fields.
- STS12-16: ``STS.input.<subset>.txt`` + ``STS.gs.<subset>.txt`` 1:1 by line; STS15/16 gold has blank
  lines for unscored pairs (skipped, counted); STS16 input has 4 fields (sentence1, sentence2, source1, source2).
- SICK: TAB-separated with header, CRLF in some files and LF in others; columns read by name.
- SNLI SentEval: parallel ``s1.<split>``, ``s2.<split>``, ``labels.<split>`` files, one item per line.
- MNLI / XNLI / SNLI-CAD: TAB-separated with header, quoting off, columns read by name.
- ANLI: quoted CSV with multi-line fields, column order differs per round: read by name.
- Official SNLI/MNLI jsonl: ``sentence1``, ``sentence2``, ``gold_label`` per line.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from pathlib import Path

# ANLI uses one-letter labels; everything else spells them out.
ANLI_LABELS = {"e": "entailment", "n": "neutral", "c": "contradiction"}


@dataclass
class Parsed:
    rows: list[dict] = field(default_factory=list)
    rejects: list[dict] = field(default_factory=list)
    skipped: int = 0

    def extend(self, other: "Parsed") -> "Parsed":
        self.rows += other.rows
        self.rejects += other.rejects
        self.skipped += other.skipped
        return self


def _rel(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return path.as_posix()


def _lines(path: Path) -> list[str]:
    """Physical lines without their terminator; CRLF and LF may be mixed in one file."""
    text = path.read_text(encoding="utf-8-sig")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # final newline; a file without one (SICK.txt) keeps its last line
    return [ln[:-1] if ln.endswith("\r") else ln for ln in lines]


def _reject(file: str, line: int, reason: str, raw: str) -> dict:
    return {"file": file, "line": line, "reason": reason, "raw": raw}


def read_stsb(path: Path, root: Path) -> Parsed:
    """STS Benchmark csv: genre, file, year, id, score, sentence1, sentence2 [, license, source]."""
    out, rel = Parsed(), _rel(path, root)
    for n, line in enumerate(_lines(path), start=1):
        fields = line.split("\t")
        if len(fields) not in (7, 9):
            out.rejects.append(_reject(rel, n, f"expected 7 or 9 tab-separated fields, got {len(fields)}", line))
            continue
        genre, source_file, year, _id, score, s1, s2 = fields[:7]
        out.rows.append({"subset": source_file, "sentence1": s1, "sentence2": s2, "score": score, "file": rel, "line": n})
    return out


def read_sts_year(input_path: Path, gold_path: Path, subset: str, root: Path, n_fields: int = 2) -> Parsed:
    """SemEval STS input + gold files. ``n_fields`` is 2 (STS12-15) or 4 (STS16); blank gold = unscored."""
    out, rel = Parsed(), _rel(input_path, root)
    inputs, golds = _lines(input_path), _lines(gold_path)
    if len(inputs) != len(golds):
        raise ValueError(
            f"{rel}: {len(inputs)} input lines but {_rel(gold_path, root)} has {len(golds)} gold lines; "
            "the files must align line by line"
        )
    for n, (line, gold) in enumerate(zip(inputs, golds), start=1):
        if not gold.strip():
            out.skipped += 1  # pair was not scored by the organisers; SentEval drops it too
            continue
        fields = line.split("\t")
        if len(fields) != n_fields:
            out.rejects.append(_reject(rel, n, f"expected {n_fields} tab-separated fields, got {len(fields)}", line))
            continue
        out.rows.append({"subset": subset, "sentence1": fields[0], "sentence2": fields[1], "score": gold.strip(), "file": rel, "line": n})
    return out


def _read_header_tsv(path: Path, root: Path, columns: dict[str, str]) -> Parsed:
    """TAB-separated file with a header; ``columns`` maps output key -> header name."""
    out, rel = Parsed(), _rel(path, root)
    lines = _lines(path)
    if not lines:
        raise ValueError(f"{rel}: empty file, expected a header line")
    header = lines[0].split("\t")
    missing = [c for c in columns.values() if c not in header]
    if missing:
        raise ValueError(f"{rel}: header lacks column(s) {missing}; found {header}")
    idx = {key: header.index(col) for key, col in columns.items()}
    for n, line in enumerate(lines[1:], start=2):
        fields = line.split("\t")
        if len(fields) != len(header):
            out.rejects.append(_reject(rel, n, f"expected {len(header)} tab-separated fields, got {len(fields)}", line))
            continue
        row = {key: fields[i] for key, i in idx.items()}
        row.update(file=rel, line=n)
        out.rows.append(row)
    return out


def read_sick(path: Path, root: Path) -> Parsed:
    """SICK SemEval-2014 files (and SICK.txt): pair_ID, sentence_A, sentence_B, relatedness_score, ..."""
    out = _read_header_tsv(path, root, {"sentence1": "sentence_A", "sentence2": "sentence_B", "score": "relatedness_score"})
    for row in out.rows:
        row["subset"] = "SICK"
    return out


def read_mnli_tsv(path: Path, root: Path) -> Parsed:
    """MultiNLI dev TSV: index, premise, hypothesis, gold_label, ... (quoting off)."""
    return _read_header_tsv(path, root, {"premise": "premise", "hypothesis": "hypothesis", "label": "gold_label"})


def read_xnli_tsv(path: Path, root: Path) -> Parsed:
    """XNLI TSV with English columns sentence1_en / sentence2_en and `label`."""
    return _read_header_tsv(path, root, {"premise": "sentence1_en", "hypothesis": "sentence2_en", "label": "label"})


def read_cad_tsv(path: Path, root: Path) -> Parsed:
    """SNLI counterfactually-augmented data: sentence1, sentence2, gold_label."""
    return _read_header_tsv(path, root, {"premise": "sentence1", "hypothesis": "sentence2", "label": "gold_label"})


def read_anli_csv(path: Path, root: Path) -> Parsed:
    """ANLI analysis CSV: quoted, multi-line fields; premise=context, hypothesis=statement, label=gold_label (e/n/c)."""
    out, rel = Parsed(), _rel(path, root)
    with open(path, encoding="utf-8-sig", newline="") as fh:
        reader = csv.reader(fh, strict=True)
        try:
            header = next(reader)
        except StopIteration:
            raise ValueError(f"{rel}: empty file, expected a header line") from None
        need = {"premise": "context", "hypothesis": "statement", "label": "gold_label"}
        missing = [c for c in need.values() if c not in header]
        if missing:
            raise ValueError(f"{rel}: header lacks column(s) {missing}")
        idx = {k: header.index(c) for k, c in need.items()}
        start = reader.line_num + 1
        while True:
            try:
                fields = next(reader)
            except StopIteration:
                break
            except csv.Error as exc:  # unbalanced quote etc.: the rest of the file cannot be trusted
                out.rejects.append(_reject(rel, start, f"CSV parse error: {exc}", ""))
                break
            if len(fields) != len(header):
                out.rejects.append(_reject(rel, start, f"expected {len(header)} fields, got {len(fields)}", ",".join(fields)))
            else:
                row = {k: fields[i] for k, i in idx.items()}
                row["label"] = ANLI_LABELS.get(row["label"].strip().lower(), row["label"])
                row.update(file=rel, line=start)
                out.rows.append(row)
            start = reader.line_num + 1
    return out


def read_senteval_snli(folder: Path, split: str, root: Path) -> Parsed:
    """SentEval SNLI: ``s1.<split>``, ``s2.<split>``, ``labels.<split>``, parallel, one item per line."""
    out = Parsed()
    paths = [folder / f"{name}.{split}" for name in ("s1", "s2", "labels")]
    s1, s2, labels = (_lines(p) for p in paths)
    if not (len(s1) == len(s2) == len(labels)):
        raise ValueError(
            f"{_rel(paths[0], root)}: parallel files differ in length (s1 {len(s1)}, s2 {len(s2)}, labels {len(labels)})"
        )
    rel = _rel(paths[0], root)
    for n, (a, b, lab) in enumerate(zip(s1, s2, labels), start=1):
        out.rows.append({"premise": a, "hypothesis": b, "label": lab, "file": rel, "line": n})
    return out


def read_nli_jsonl(path: Path, root: Path) -> Parsed:
    """Official SNLI / MultiNLI jsonl: one JSON object per line with sentence1, sentence2, gold_label."""
    out, rel = Parsed(), _rel(path, root)
    for n, line in enumerate(_lines(path), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
            row = {"premise": obj["sentence1"], "hypothesis": obj["sentence2"], "label": obj["gold_label"]}
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            out.rejects.append(_reject(rel, n, f"bad jsonl record: {exc.__class__.__name__}: {exc}", line[:500]))
            continue
        row.update(file=rel, line=n)
        out.rows.append(row)
    return out

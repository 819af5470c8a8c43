"""One reader per raw file format. Readers parse, they do not judge content.

Each reader returns a :class:`Parsed`: ``rows`` (one dict per record, every field still a string, with
its provenance ``file`` and 1-based physical ``line``), ``rejects`` (records whose *structure* is
broken — wrong field count, unreadable quoting — with file, line, reason and the raw text) and
``skipped`` (records that are absent by design, e.g. unscored STS15/16 pairs with a blank gold line).
Content checks (empty sentences, score range, labels, duplicates) happen in :mod:`stsreg.product.data.schemas`.

STS row keys: ``subset, sentence1, sentence2, score``. NLI row keys: ``premise, hypothesis, label``.
``file`` is the path relative to the raw root so that rejects point at the file a user can open.

Every record is accounted for: ``Parsed.read`` counts the records each file held, and each one ends up in
exactly one of ``rows``, ``rejects`` or ``skipped`` (:meth:`Parsed.check_accounting`). Bytes that are not
UTF-8 reject their line (file, line, "not valid UTF-8"), not the file. A quoted CSV record that does not parse
rejects its first physical line and parsing resumes on the next line, so one broken quote cannot swallow the
records after it. Structural problems that make a whole file unusable (a missing header column, parallel
files of different lengths) raise :class:`~stsreg.infra.errors.InputError` naming the file.

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
from pathlib import Path

from stsreg.infra.errors import InputError
from stsreg.product.data import parsed
from stsreg.product.data.parsed import NOT_UTF8, Parsed

# ANLI uses one-letter labels; everything else spells them out.
ANLI_LABELS = {"e": "entailment", "n": "neutral", "c": "contradiction"}


def read_stsb(path: Path, root: Path) -> Parsed:
    """STS Benchmark csv: genre, file, year, id, score, sentence1, sentence2 [, license, source]."""
    out, rel = Parsed(), parsed.rel(path, root)
    for n, line in enumerate(parsed.lines(path), start=1):
        out.read[rel] += 1
        fields = line.split("\t")
        if parsed.undecodable(line):
            out.rejects.append(parsed.reject(rel, n, NOT_UTF8, line))
        elif len(fields) not in (7, 9):
            out.rejects.append(parsed.reject(rel, n, f"expected 7 or 9 tab-separated fields, got {len(fields)}", line))
        if parsed.undecodable(line) or len(fields) not in (7, 9):
            continue
        genre, source_file, year, _id, score, s1, s2 = fields[:7]
        out.rows.append({"subset": source_file, "sentence1": s1, "sentence2": s2, "score": score, "file": rel,
                         "line": n})
    return out


def read_sts_year(input_path: Path, gold_path: Path, subset: str, root: Path, n_fields: int = 2) -> Parsed:
    """SemEval STS input + gold files. ``n_fields`` is 2 (STS12-15) or 4 (STS16); blank gold = unscored."""
    out, rel = Parsed(), parsed.rel(input_path, root)
    inputs, golds = parsed.lines(input_path), parsed.lines(gold_path)
    if len(inputs) != len(golds):
        raise InputError(
            f"{rel}: {len(inputs)} input lines but {parsed.rel(gold_path, root)} has {len(golds)} gold lines; "
            "the files must align line by line"
        )
    for n, (line, gold) in enumerate(zip(inputs, golds), start=1):
        out.read[rel] += 1
        if parsed.undecodable(line, gold):
            out.rejects.append(parsed.reject(rel, n, NOT_UTF8 + " in the input or gold line", line + "\t" + gold))
            continue
        if not gold.strip():
            out.skip(rel)  # pair was not scored by the organisers; SentEval drops it too
            continue
        fields = line.split("\t")
        if len(fields) != n_fields:
            out.rejects.append(parsed.reject(rel, n, f"expected {n_fields} tab-separated fields, got {len(fields)}",
                                             line))
            continue
        out.rows.append({"subset": subset, "sentence1": fields[0], "sentence2": fields[1], "score": gold.strip(),
                         "file": rel,
                         # a bad score is reported against gold_file
                         "line": n, "gold_file": parsed.rel(gold_path, root)})
    return out


def _read_header_tsv(path: Path, root: Path, columns: dict[str, str]) -> Parsed:
    """TAB-separated file with a header; ``columns`` maps output key -> header name."""
    out, rel = Parsed(), parsed.rel(path, root)
    lines = parsed.lines(path)
    if not lines:
        raise InputError(f"{rel}: empty file, expected a header line")
    header = lines[0].split("\t")
    missing = [c for c in columns.values() if c not in header]
    if missing:
        raise InputError(f"{rel}: line 1: header lacks column(s) {missing}; found "
                         f"{[parsed.printable(h) for h in header]}")
    idx = {key: header.index(col) for key, col in columns.items()}
    for n, line in enumerate(lines[1:], start=2):
        out.read[rel] += 1
        fields = line.split("\t")
        if parsed.undecodable(line):
            out.rejects.append(parsed.reject(rel, n, NOT_UTF8, line))
            continue
        if len(fields) != len(header):
            out.rejects.append(parsed.reject(rel, n, f"expected {len(header)} tab-separated fields, got {len(fields)}",
                                             line))
            continue
        row = {key: fields[i] for key, i in idx.items()}
        row.update(file=rel, line=n)
        out.rows.append(row)
    return out


def read_sick(path: Path, root: Path) -> Parsed:
    """SICK SemEval-2014 files (and SICK.txt): pair_ID, sentence_A, sentence_B, relatedness_score, ..."""
    out = _read_header_tsv(path, root, {"sentence1": "sentence_A", "sentence2": "sentence_B",
                                        "score": "relatedness_score"})
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


def _csv_records(lines: list[str], start: int, n_fields: int):
    """Yield ``(line, fields | None, raw, reason)`` for each CSV record in ``lines[start:]`` (``line`` 1-based).

    A record that raises a parse error, or spans several lines and still has a field count other than
    ``n_fields``, is not trusted (most likely an unbalanced quote that swallowed the lines after it): its
    *first physical line* is yielded as broken (``fields`` None, ``reason`` says why) and parsing resumes on
    the next line. One broken quote then costs the lines it touched, never every record after it.
    """
    i = start
    while i < len(lines):
        taken = 0

        def feed(first=i):
            nonlocal taken
            for ln in lines[first:]:
                taken += 1
                yield ln + "\n"

        try:
            fields, reason = next(csv.reader(feed(), strict=True)), ""
        except csv.Error as exc:
            fields, reason = None, f"CSV parse error: {exc}"
        if fields is not None and taken > 1 and len(fields) != n_fields:
            fields, reason = None, (f"expected {n_fields} fields, got {len(fields)} in a record spanning {taken} "
                                    "lines (unbalanced quote?)")
        if fields is None:
            yield i + 1, None, lines[i], f"{reason}; this line rejected, reading resumed at line {i + 2}"
            i += 1
        else:
            yield i + 1, fields, "\n".join(lines[i:i + taken]), ""
            i += taken


def read_anli_csv(path: Path, root: Path) -> Parsed:
    """ANLI analysis CSV: quoted, multi-line fields; premise=context, hypothesis=statement, label=gold_label (e/n/c)."""
    out, rel = Parsed(), parsed.rel(path, root)
    lines = parsed.lines(path)
    try:
        header = next(csv.reader(lines[:1], strict=True), None)
    except csv.Error as exc:
        raise InputError(f"{rel}: line 1: unreadable CSV header: {exc}") from None
    if not header:
        raise InputError(f"{rel}: empty file, expected a header line")
    need = {"premise": "context", "hypothesis": "statement", "label": "gold_label"}
    missing = [c for c in need.values() if c not in header]
    if missing:
        raise InputError(f"{rel}: line 1: header lacks column(s) {missing}")
    idx = {k: header.index(c) for k, c in need.items()}
    for line, fields, raw, reason in _csv_records(lines, 1, len(header)):
        out.read[rel] += 1
        if fields is None:
            out.rejects.append(parsed.reject(rel, line, reason, raw[:2000]))
        elif len(fields) != len(header):
            out.rejects.append(parsed.reject(rel, line, f"expected {len(header)} fields, got {len(fields)}",
                                             raw[:2000]))
        elif parsed.undecodable(*fields):
            out.rejects.append(parsed.reject(rel, line, NOT_UTF8, raw[:2000]))
        else:
            row = {k: fields[i] for k, i in idx.items()}
            row["raw_label"] = row["label"]  # as written, so that prepare counts the mapping
            row["label"] = ANLI_LABELS.get(row["label"].strip().lower(), row["label"])
            row.update(file=rel, line=line)
            out.rows.append(row)
    return out


def read_senteval_snli(folder: Path, split: str, root: Path) -> Parsed:
    """SentEval SNLI: ``s1.<split>``, ``s2.<split>``, ``labels.<split>``, parallel, one item per line."""
    out = Parsed()
    paths = [folder / f"{name}.{split}" for name in ("s1", "s2", "labels")]
    s1, s2, labels = (parsed.lines(p) for p in paths)
    if not (len(s1) == len(s2) == len(labels)):
        raise InputError(
            f"{parsed.rel(paths[0], root)}: parallel files differ in length (s1 {len(s1)}, s2 {len(s2)}, labels "
            f"{len(labels)})"
        )
    rel = parsed.rel(paths[0], root)
    for n, (a, b, lab) in enumerate(zip(s1, s2, labels), start=1):
        out.read[rel] += 1
        if parsed.undecodable(a, b, lab):
            out.rejects.append(parsed.reject(rel, n, NOT_UTF8 + " in s1, s2 or labels", "\t".join((a, b, lab))))
            continue
        out.rows.append({"premise": a, "hypothesis": b, "label": lab, "file": rel, "line": n})
    return out


def read_nli_jsonl(path: Path, root: Path) -> Parsed:
    """Official SNLI / MultiNLI jsonl: one JSON object per line with sentence1, sentence2, gold_label."""
    out, rel = Parsed(), parsed.rel(path, root)
    for n, line in enumerate(parsed.lines(path), start=1):
        if not line.strip():
            continue  # blank lines hold no record
        out.read[rel] += 1
        if parsed.undecodable(line):
            out.rejects.append(parsed.reject(rel, n, NOT_UTF8, line[:500]))
            continue
        try:
            obj = json.loads(line)
            row = {"premise": obj["sentence1"], "hypothesis": obj["sentence2"], "label": obj["gold_label"]}
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            out.rejects.append(parsed.reject(rel, n, f"bad jsonl record: {exc.__class__.__name__}: {exc}", line[:500]))
            continue
        row.update(file=rel, line=n)
        out.rows.append(row)
    return out

"""The ``prepare`` stage: raw files -> validated, normalised parquet tables, rejects and data metrics.

    stsreg prepare            # reads data/raw, writes data/prepared, data/rejected, metrics/data.json

Outputs (schemas in :mod:`stsreg.product.data.schemas`):
- ``data/prepared/sts.parquet``  all STS rows (dataset, subset, split, sentence1, sentence2, score, ...)
- ``data/prepared/nli.parquet``  all NLI rows (source, split, premise, hypothesis, label 0/1/2, ...)
- ``data/prepared/nli_train.parquet``  the NLI rows that feed training (``prepare.nli_train``)
- ``data/prepared/leakage.parquet``  every evaluation test pair seen in a training table, and any
  training row removed for leakage (``prepare.leakage.remove_from_training``)
- ``data/rejected/<dataset>.parquet``  rejected rows with file, line, reason and raw text
- ``data/rejected/duplicates.parquet``  every duplicate pair within a split, with its line and the kept copy's line
- ``data/prepared/summary.json``  per-dataset counts (per split, rejected, duplicates, unscored, normalised values),
  leakage, and raw files changed since fetch (only with ``prepare.allow_local_edits``)
- ``metrics/data.json``  the headline of that summary (:func:`headline`): what ``dvc metrics show`` compares

Nothing is dropped silently: every row read is either kept, rejected (with a reason, counted), skipped
by design (unscored STS15/16 pairs, counted) or removed for leakage (listed, counted). A run that refuses
(``prepare.max_rejected_fraction``) writes its rejects to ``data/rejected.refused/`` and replaces nothing.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from pathlib import Path

import pandas as pd
from tqdm.auto import tqdm

from stsreg.infra import atomic, scales
from stsreg.infra.config import Params, StsTableSource
from stsreg.product.data import leakage, user_tables
from stsreg.product.data.catalogue import Part, all_nli_entries, nli_parts, sts_parts
from stsreg.product.data.precheck import check_inputs
from stsreg.product.data.rejects import PrepareError, check_rejected_fraction, refused_dir, write_rejects  # noqa: F401
from stsreg.product.data.schemas import NLI_LABELS, nli_schema, sts_schema, validate
from stsreg.infra.errors import InputError

log = logging.getLogger(__name__)

STS_COLUMNS = ["dataset", "subset", "split", "sentence1", "sentence2", "score", "file", "line"]
NLI_COLUMNS = ["source", "split", "premise", "hypothesis", "label", "file", "line"]
REJECT_COLUMNS = ["dataset", "split", "file", "line", "reason", "raw"]


def _frame(part: Part, rows: list[dict]) -> tuple[pd.DataFrame, dict[str, int]]:
    """The parsed rows of one part as a table; returns it and how many values each normalisation changed:
    ``texts_stripped`` (a sentence with leading/trailing whitespace), ``scores_stripped`` (an STS score with
    whitespace around the number), ``labels_normalised`` (an NLI label written otherwise than its canonical name:
    MNLI's ``Entailment`` lowercased, ANLI's ``e`` mapped by the reader)."""
    if part.kind == "sts":
        cols, texts, name_col, value_col = STS_COLUMNS, ("sentence1", "sentence2"), "dataset", "score"
    else:
        cols, texts, name_col, value_col = NLI_COLUMNS, ("premise", "hypothesis"), "source", "label"
    df = pd.DataFrame(rows, columns=[c for c in cols if c not in (name_col, "split")])
    df.insert(0, name_col, part.dataset)
    df.insert(1, "split", part.split)
    counts = {"texts_stripped": 0}
    for col in texts:
        raw = df[col].astype(str)
        df[col] = raw.str.strip()
        counts["texts_stripped"] += int((df[col] != raw).sum())
    df["line"] = df["line"].astype(int)
    raw_value = df[value_col].astype(str)
    if part.kind == "sts":
        df[value_col] = raw_value.str.strip()
        counts["scores_stripped"] = int((df[value_col] != raw_value).sum())
    else:
        df[value_col] = raw_value.str.strip().str.lower()
        as_written = pd.Series([r.get("raw_label", r["label"]) for r in rows], dtype=object)  # before a reader's map
        counts["labels_normalised"] = int((df[value_col] != as_written.astype(str)).sum())
    return df[cols].reset_index(drop=True), counts


def load_part(part: Part, raw_root: Path, duplicate_pairs: str, table: StsTableSource | None = None
              ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, dict]:
    """Read and validate one (dataset, split). Returns (kept rows, rejected rows, duplicate pairs, counts).
    ``table``: an STS part's declaration (its scale: scores outside are rejected, kept ones mapped to 0-5); NLI: None.

    Duplicate pairs: every later copy of a pair already seen in the split, with its ``line`` and the
    ``first_line`` of the copy that was kept (``prepare.duplicate_pairs: flag`` keeps them all)."""
    parsed = part.read(raw_root)
    parsed.check_accounting()
    # a score's bad value lives in the gold file when the reader pairs an input file with one (STS12-16)
    value_file = pd.Series([r.get("gold_file", r["file"]) for r in parsed.rows], dtype=object)
    df, normalised = _frame(part, parsed.rows)
    if part.kind == "sts":
        raw_value = df["score"]
        df["score"] = pd.to_numeric(df["score"], errors="coerce").astype(float)
        schema = sts_schema(*table.scale)
        text = ("sentence1", "sentence2")
    else:
        raw_value = df["label"]
        schema = nli_schema()
        text = ("premise", "hypothesis")
    reasons, duplicate = validate(df, schema, raw_score=raw_value if part.kind == "sts" else None)
    if duplicate_pairs == "reject":
        reasons = reasons.where(~(duplicate & (reasons == "")), "duplicate pair within split (first occurrence kept)")
    bad = reasons != ""
    score_reason = reasons.str.startswith("score ")
    content_rejects = pd.DataFrame({
        "file": value_file.where(score_reason & bad, df["file"])[bad], "line": df.loc[bad, "line"],
        "reason": reasons[bad],
        "raw": df.loc[bad, text[0]] + "\t" + df.loc[bad, text[1]] + "\t" + raw_value[bad].astype(str),
    })
    rejects = pd.concat([pd.DataFrame(parsed.rejects, columns=["file", "line", "reason", "raw"]), content_rejects],
                        ignore_index=True)
    rejects.insert(0, "dataset", part.dataset)
    rejects.insert(1, "split", part.split)
    first_line = df.groupby(["split", *text], sort=False)["line"].transform("first")
    duplicates = pd.DataFrame({"dataset": part.dataset, "split": part.split, "file": df.loc[duplicate, "file"],
                               "line": df.loc[duplicate, "line"], "first_line": first_line[duplicate],
                               "rejected": bad[duplicate]}).reset_index(drop=True)
    kept = df[~bad].reset_index(drop=True)
    if part.kind == "nli":
        kept["label"] = kept["label"].map(NLI_LABELS).astype("int8")
    else:
        kept["score"] = scales.to_internal(kept["score"], table.scale, table.rescale)
    counts = {"read": len(df) + len(parsed.rejects), "kept": len(kept), "rejected": len(rejects),
              "duplicate_pairs": int((duplicate & ~bad).sum()), "unscored_skipped": parsed.skipped, **normalised}
    return kept, rejects[REJECT_COLUMNS], duplicates, counts


def _check_nli_train(entries: tuple[str, ...], known: list[str]) -> None:
    unknown = [e for e in entries if e not in known]
    if unknown:
        raise InputError(f"params.yaml: prepare.nli_train: unknown NLI entries {unknown}; known: {known}")


def _select_nli_train(nli: pd.DataFrame, entries: tuple[str, ...]) -> pd.DataFrame:
    key = nli["source"] + "/" + nli["split"]
    return nli[key.isin(entries)].reset_index(drop=True)


#: The full data summary, beside the tables it describes.
SUMMARY = "summary.json"


def headline(summary: dict) -> dict:
    """The few numbers a person compares between runs: rows kept and rejected, NLI training rows, STS test
    pairs also found in a training table (``leakage_match`` mode), and training rows removed for leakage."""
    mode = summary["leakage_match"]
    return {"rows_kept": sum(d["kept"] for d in summary["datasets"].values()),
            "rows_rejected": summary["rejected_total"], "nli_train_rows": summary["nli_train_rows"],
            "test_pairs_seen_in_train": sum(d[f"seen_{mode}"] for d in summary["leakage"].values()),
            "train_rows_removed_for_leakage": sum(summary["leakage_removed"].values())}


def _mark_leakage(sts: pd.DataFrame, nli_train: pd.DataFrame, lp, trained: tuple[str, ...]) -> tuple:
    """Mark every STS row seen in a training table (``seen_in_train``: stage 2's ``trained`` tables, NLI) and, with
    ``lp.remove_from_training``, drop leaked pairs from the training tables. Returns (sts, nli_train, leakage metrics
    per task, the leakage table (``leakage.parquet``), removed counts)."""
    mode = lp.match
    leaks = leakage.find_leaks(sts, nli_train, mode, trained)
    sts["seen_in_train"] = leaks.any(axis=1)
    leak_metrics = leakage.leakage_metrics(sts, nli_train, mode, trained)
    seen = sts[sts.seen_in_train].copy()
    seen["seen_in"] = leaks[sts.seen_in_train].apply(lambda r: ",".join(r.index[r]), axis=1)
    seen["removed_from_training"] = False
    leak_rows = [seen.rename(columns={"dataset": "table"})]
    removed_counts = {}
    if lp.remove_from_training:
        eval_keys = leakage.eval_pair_keys(sts, mode)
        tables = leakage.train_tables(sts, trained)
        is_train = sts.dataset.isin(tables) & (sts.split == "train")
        sts_kept, sts_removed = leakage.remove_from_training(sts[is_train], "sentence1", "sentence2", eval_keys, mode)
        sts = pd.concat([sts[~is_train], sts_kept]).sort_index().reset_index(drop=True)
        nli_train, nli_removed = leakage.remove_from_training(nli_train, "premise", "hypothesis", eval_keys, mode)
        for frame in (sts_removed, nli_removed):
            frame = frame.rename(columns={"dataset": "table", "source": "table", "premise": "sentence1",
                                          "hypothesis": "sentence2"})
            leak_rows.append(frame.assign(removed_from_training=True))
        removed_counts = {**{f"{t}_train": int((sts_removed.dataset == t).sum()) for t in tables},
                          "nli_train": len(nli_removed)}
    leak_table = pd.concat(leak_rows, ignore_index=True)[
        ["table", "split", "sentence1", "sentence2", "file", "line", "seen_in", "removed_from_training"]]
    return sts, nli_train, leak_metrics, leak_table, removed_counts


def _read_parts(parts: list[Part], public: dict[str, StsTableSource], raw_root: Path, duplicate_pairs: str) -> tuple:
    """Every part through :func:`load_part` (STS on its declared table's scale). Returns (kept frames per kind, rejects
    per dataset, duplicate frames, counts per dataset with each public table's scale, d and reader)."""
    kept: dict[str, list[pd.DataFrame]] = {"sts": [], "nli": []}
    rejects: dict[str, list[pd.DataFrame]] = defaultdict(list)
    duplicates: list[pd.DataFrame] = []
    stats: dict[str, dict] = defaultdict(lambda: defaultdict(int))
    for part in tqdm(parts, desc="prepare", unit="part", disable=None):
        k, r, d, counts = load_part(part, raw_root, duplicate_pairs, public.get(part.dataset))
        kept[part.kind].append(k)
        rejects[part.dataset].append(r)
        duplicates.append(d)
        entry = stats[part.dataset]
        entry[f"rows_{part.split}"] += counts["kept"]
        for name, value in counts.items():
            entry[name] += value
    for t in public.values():
        stats[t.name].update(scale=list(t.scale), d=t.d, reader=t.reader)
    return kept, rejects, duplicates, stats


def prepare(raw_root: Path, prepared_dir: Path, rejected_dir: Path, metrics_path: Path, params: Params, *,
            registry: Path, project: Path = Path(".")) -> dict:
    """Run the whole stage; returns the full summary (``prepared_dir/summary.json``; its :func:`headline` goes to
    ``metrics_path``). Raises :class:`PrepareError` last.

    Every raw file is checked first against ``registry`` (:func:`~stsreg.product.data.precheck.check_inputs`: size,
    sha256, ``min_rows``); the outputs are written atomically, folders first and the metrics file last."""
    p = params.prepare
    public = {t.name: t for t in p.sts_tables if t.reader}  # declared public tables, read by the mirror's readers
    parts = sts_parts(tuple(t.reader for t in public.values())) + nli_parts(params.fetch.extra_nli)
    _check_nli_train(p.nli_train, all_nli_entries(params.fetch.extra_nli))
    changed = check_inputs(parts, raw_root, registry, p.allow_local_edits, params.fetch.extra_nli)
    kept, rejects, duplicates, stats = _read_parts(parts, public, raw_root, p.duplicate_pairs)
    user_kept = user_tables.read_tables(tuple(t for t in p.sts_tables if not t.reader), project, rejects, stats)

    datasets = {name: {**entry, "rejected_fraction": round(entry["rejected"] / entry["read"], 6) if entry["read"]
                       else 0.0}
                for name, entry in stats.items()}
    rejects, duplicates = {n: pd.concat(f, ignore_index=True) for n, f in rejects.items()}, pd.concat(duplicates,
                                                                                                      ignore_index=True)
    # a refused run replaces nothing: its rejects go aside, the previous tables and metrics stay as they were
    check_rejected_fraction(datasets, p.max_rejected_fraction, rejects, duplicates, refused_dir(rejected_dir))

    sts = pd.concat(kept["sts"] + user_kept, ignore_index=True)
    nli = pd.concat(kept["nli"], ignore_index=True)
    nli_train = _select_nli_train(nli, p.nli_train)

    mode, trained = p.leakage.match, params.stage2.train_tables
    sts, nli_train, leak_metrics, leak_table, removed_counts = _mark_leakage(sts, nli_train, p.leakage, trained)

    with atomic.staged_dir(prepared_dir) as staged_prepared, atomic.staged_dir(rejected_dir) as staged_rejected:
        sts.to_parquet(staged_prepared / "sts.parquet", index=False)
        nli.to_parquet(staged_prepared / "nli.parquet", index=False)
        nli_train.to_parquet(staged_prepared / "nli_train.parquet", index=False)
        leak_table.astype({"seen_in": str}).to_parquet(staged_prepared / "leakage.parquet", index=False)
        write_rejects(staged_rejected, rejects, duplicates)

    metrics = {
        "datasets": datasets,
        "rejected_total": sum(d["rejected"] for d in datasets.values()),
        "nli_train_rows": len(nli_train),
        "leakage_match": mode,
        "leakage": leak_metrics,
        "leakage_removed": removed_counts,
        "raw_files_changed": changed,
    }
    atomic.write_json(prepared_dir / SUMMARY, metrics)
    atomic.write_json(metrics_path, headline(metrics))  # last: complete metrics describe complete tables
    return metrics

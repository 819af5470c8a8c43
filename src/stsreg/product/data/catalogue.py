"""Which raw files make up each dataset, and which reader parses them.

Names used everywhere downstream (tables, rejects files, metric keys):
STS datasets ``sts12 .. sts16, stsb, sickr`` with splits train/dev/test (STS12-16 are test only);
NLI sources ``snli, mnli, xnli, anli, snli_cad`` with their published split names.

Which of them are prepared, on which score scale and with which ``d``, is declared in ``prepare.sts_tables``
(``reader: sts12 .. sickr``; :data:`stsreg.infra.public_tables.PUBLIC` declares them): this module reads them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pandas as pd
import torch

from stsreg.infra import public_tables
from stsreg.infra.config import ExtraNLISource
from stsreg.infra.public_tables import PublicTable, YearFiles
from stsreg.product.data import readers
from stsreg.product.data.readers import Parsed

#: The seven evaluation tasks of the SentEval "all" protocol, in reporting order.
EVAL_TASKS = public_tables.AVG7


@dataclass(frozen=True)
class Part:
    """One (dataset, split), how to read it (``read(raw_root) -> Parsed``) and the raw files it needs."""

    dataset: str
    split: str
    read: Callable[[Path], Parsed]
    kind: str  # "sts" or "nli"
    # paths relative to the raw root; checked by stsreg.product.data.precheck before reading
    files: tuple[str, ...] = ()


def _parts(table: PublicTable) -> list[Part]:
    """The parts (one per split) a public table's :attr:`~PublicTable.layout` names, each with its reader."""
    layout = table.layout
    if isinstance(layout, YearFiles):
        def read_year(root: Path) -> Parsed:
            out = Parsed()
            for subset in layout.subsets:
                out.extend(readers.read_sts_year(root / layout.folder / layout.input.format(subset),
                                                 root / layout.folder / layout.gold.format(subset), subset, root,
                                                 n_fields=layout.n_fields))
            return out

        return [Part(table.name, "test", read_year, "sts", layout.files()["test"])]
    parse = getattr(readers, layout.parser)
    return [Part(table.name, split, lambda root, f=f: parse(root / f, root), "sts", (f,))
            for split, f in layout.splits.items()]


#: The mirror's readers of public STS tables (``prepare.sts_tables[].reader``) -> the parts, one per split, they read.
READERS: dict[str, Callable[[], list[Part]]] = {t.name: (lambda t=t: _parts(t)) for t in public_tables.PUBLIC}


def sts_parts(names: tuple[str, ...] = EVAL_TASKS) -> list[Part]:
    """The parts of the public tables ``names`` (their readers' names), in that order."""
    return [part for name in names for part in READERS[name]()]


def nli_parts(extra: tuple[ExtraNLISource, ...] = ()) -> list[Part]:
    snli = "NLI/SNLI_senteval_tokenized"
    parts = [Part("snli", s, lambda root, s=s: readers.read_senteval_snli(root / snli, s, root), "nli",
                  tuple(f"{snli}/{name}.{s}" for name in ("s1", "s2", "labels"))) for s in ("dev", "test")]
    mnli = "NLI/MNLI/dev_matched.tsv"
    parts.append(Part("mnli", "dev_matched", lambda root: readers.read_mnli_tsv(root / mnli, root), "nli", (mnli,)))
    for s in ("dev", "test"):
        f = f"NLI/XNLI/en_{s}.tsv"
        parts.append(Part("xnli", s, lambda root, f=f: readers.read_xnli_tsv(root / f, root), "nli", (f,)))
    for r in (1, 2, 3):
        f = f"NLI/ANLI/anli_r{r}_dev_analysis.csv"
        parts.append(Part("anli", f"dev_r{r}", lambda root, f=f: readers.read_anli_csv(root / f, root), "nli", (f,)))
    for s in ("train", "dev", "test"):
        f = f"NLI/SNLI_CAD/{s}.tsv"
        parts.append(Part("snli_cad", s, lambda root, f=f: readers.read_cad_tsv(root / f, root), "nli", (f,)))
    parts += [Part(e.name, e.split, lambda root, e=e: readers.read_nli_jsonl(root / e.file, root), "nli", (e.file,))
              for e in extra]
    return parts


def all_nli_entries(extra: tuple[ExtraNLISource, ...] = ()) -> list[str]:
    """Every ``source/split`` an NLI training list may name."""
    return [f"{p.dataset}/{p.split}" for p in nli_parts(extra)]


# --- Selections of the prepared tables: the one home of "which rows train, which rows select" -----------------
#: The STS tables stage 2 (and the comparison's rows) train on by default (``stage2.train_tables``).
TRAIN_DATASETS = public_tables.TRAINED


def sts_training_pairs(sts: pd.DataFrame, tables: tuple[str, ...] = TRAIN_DATASETS) -> pd.DataFrame:
    """The train rows of ``tables`` (default STS-B + SICK-R; declared tables too: ``stage2.train_tables``):
    sentence1, sentence2, score on the 0-5 scale (STS-B 0-5, SICK-R 1-5 as annotated; declared tables mapped from
    their scale), in table order, index reset."""
    return sts[sts.dataset.isin(tables) & (sts.split == "train")].reset_index(drop=True)


def dev_split(sts: pd.DataFrame, table: str = public_tables.DEV_TABLE) -> pd.DataFrame:
    """The dev rows of ``table`` (``stage2.dev_table``, default STS-B), index reset: the only labels a choice reads."""
    return table_split(sts, table, "dev")


def table_split(sts: pd.DataFrame, table: str, split: str) -> pd.DataFrame:
    """The rows of ``table``'s ``split`` (train | dev | test), index reset."""
    return sts[(sts.dataset == table) & (sts.split == split)].reset_index(drop=True)


def sample_pairs(table: pd.DataFrame, max_pairs: int, seed: int) -> pd.DataFrame:
    """At most ``max_pairs`` rows (0 = all) drawn with ``seed`` (pandas' sampler, so equal seeds draw equal rows)."""
    if max_pairs and len(table) > max_pairs:
        return table.sample(n=max_pairs, random_state=seed).reset_index(drop=True)
    return table.reset_index(drop=True)


def unique_sentences(*columns) -> tuple[list[str], list[torch.Tensor]]:
    """Each distinct sentence once (first-seen order) and, per column, the (n,) index of its sentences in that list:
    encode ``unique`` once, then ``emb[index]`` gives the column's embeddings."""
    unique = list(dict.fromkeys(s for col in columns for s in col))
    pos = {s: i for i, s in enumerate(unique)}
    return unique, [torch.tensor([pos[s] for s in col], dtype=torch.long) for col in columns]

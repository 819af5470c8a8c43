"""The public STS benchmarks, declared once: each table's name, how reports print it, its score scale and category
gap, whether avg7 counts it, whether stage 2 trains on it by default, and where its raw files lie in the data
mirror. Everything else is derived from :data:`PUBLIC`: the params' default ``prepare.sts_tables`` and the names a
declared table may not take (:mod:`stsreg.infra.config`), the mirror's readers (:mod:`stsreg.product.data.catalogue`),
the evaluation's tasks and every report's column headers.

Adding a benchmark is one entry here plus its raw files in ``data/sources.json``; a new file format is a parser in
:mod:`stsreg.product.data.readers` named by ``SplitFiles.parser``.

    >>> NAMES
    ('sts12', 'sts13', 'sts14', 'sts15', 'sts16', 'stsb', 'sickr')
    >>> [display(n) for n in ("stsb", "sickr", "avg7", "support")]
    ['STS-B', 'SICK-R', 'avg7', 'support']
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class YearFiles:
    """An STS shared task's test set (STS12-16): one input and one gold file per subset, ``{}`` the subset's name;
    ``n_fields``: tab-separated fields per input line (2, or 4 with sources in STS16)."""

    folder: str
    input: str
    gold: str
    n_fields: int
    subsets: tuple[str, ...]

    def files(self) -> dict[str, tuple[str, ...]]:
        """split -> the raw files (relative to the mirror's root) that split reads."""
        return {"test": tuple(f"{self.folder}/{pattern.format(s)}" for s in self.subsets
                              for pattern in (self.input, self.gold))}


@dataclass(frozen=True)
class SplitFiles:
    """A benchmark with one file per split, read by ``stsreg.product.data.readers.<parser>``."""

    parser: str
    splits: dict[str, str] = field(default_factory=dict)

    def files(self) -> dict[str, tuple[str, ...]]:
        return {split: (path,) for split, path in self.splits.items()}


@dataclass(frozen=True)
class PublicTable:
    """One public benchmark. ``name``: the table's name everywhere (``dataset`` values, metric keys such as
    ``sts12_spearman``, ``prepare.sts_tables[].reader``); ``display``: how tables and model cards print it;
    ``scale`` [lo, hi] and ``d`` (the gap between the annotators' categories) as published; ``rescale``: mapped to
    0-5 (false: kept as annotated, inside 0-5); ``in_avg7``: one of the averaged evaluation tasks; ``trains``: in
    the default ``stage2.train_tables``; ``selects``: the default ``stage2.dev_table``; ``baselines``: the benchmark of
    the baselines study (its train, dev and test splits; ``stsreg baselines``); ``by_subset``: the evaluation reports
    a Spearman per subset too (``sts12_msrpar_spearman``; SICK-R is one set)."""

    name: str
    display: str
    layout: YearFiles | SplitFiles
    scale: tuple[float, float] = (0.0, 5.0)
    rescale: bool = True
    d: float = 1.0
    in_avg7: bool = True
    trains: bool = False
    selects: bool = False
    baselines: bool = False
    by_subset: bool = True


PUBLIC: tuple[PublicTable, ...] = (
    PublicTable("sts12", "STS12", YearFiles("STS12", "STS.input.{}.txt", "STS.gs.{}.txt", 2,
                                            ("MSRpar", "MSRvid", "SMTeuroparl", "surprise.OnWN", "surprise.SMTnews"))),
    # STS13's SMT input is not redistributable (LDC): the standard 1500-pair setting has 3 subsets
    PublicTable("sts13", "STS13", YearFiles("STS13", "STS.input.{}.txt", "STS.gs.{}.txt", 2,
                                            ("FNWN", "OnWN", "headlines"))),
    PublicTable("sts14", "STS14", YearFiles("STS14", "STS.input.{}.txt", "STS.gs.{}.txt", 2,
                                            ("deft-forum", "deft-news", "headlines", "images", "OnWN", "tweet-news"))),
    PublicTable("sts15", "STS15", YearFiles("STS15", "STS.input.{}.txt", "STS.gs.{}.txt", 2,
                                            ("answers-forums", "answers-students", "belief", "headlines", "images"))),
    PublicTable("sts16", "STS16", YearFiles("STS16", "STS2016.input.{}.txt", "STS2016.gs.{}.txt", 4,
                                            ("answer-answer", "headlines", "plagiarism", "postediting",
                                             "question-question"))),
    PublicTable("stsb", "STS-B", SplitFiles("read_stsb", {"train": "STSBenchmark/sts-train.csv",
                                                          "dev": "STSBenchmark/sts-dev.csv",
                                                          "test": "STSBenchmark/sts-test.csv"}),
                trains=True, selects=True, baselines=True),
    # SICK relatedness is 1-5, kept as annotated (the paper's setting); its annotators chose integers too
    PublicTable("sickr", "SICK-R", SplitFiles("read_sick", {"train": "SICK/SICK_train.txt",
                                                            "dev": "SICK/SICK_trial.txt",
                                                            "test": "SICK/SICK_test_annotated.txt"}),
                scale=(1.0, 5.0), rescale=False, trains=True, by_subset=False),
)


def derive(tables: tuple[PublicTable, ...]) -> dict:
    """The names derived from ``tables``: ``BY_NAME``, ``NAMES`` (every table, in reporting order), ``AVG7`` (the
    evaluation tasks averaged into avg7, the SentEval "all" protocol), ``TRAINED`` (the default
    ``stage2.train_tables``), ``DEV_TABLE`` (the default ``stage2.dev_table``: the only labels a choice reads),
    ``BASELINES_TABLE`` (the baselines study's benchmark)."""
    return {"BY_NAME": {t.name: t for t in tables}, "NAMES": tuple(t.name for t in tables),
            "AVG7": tuple(t.name for t in tables if t.in_avg7), "TRAINED": tuple(t.name for t in tables if t.trains),
            "DEV_TABLE": next(t.name for t in tables if t.selects),
            "BASELINES_TABLE": next(t.name for t in tables if t.baselines)}


_derived = derive(PUBLIC)
BY_NAME: dict[str, PublicTable] = _derived["BY_NAME"]
NAMES: tuple[str, ...] = _derived["NAMES"]
AVG7: tuple[str, ...] = _derived["AVG7"]
TRAINED: tuple[str, ...] = _derived["TRAINED"]
DEV_TABLE: str = _derived["DEV_TABLE"]
BASELINES_TABLE: str = _derived["BASELINES_TABLE"]
#: The evaluation's model-selection task (the default dev table's dev split) and its metric.
DEV_TASK = f"{DEV_TABLE}_dev"
DEV_METRIC = f"{DEV_TASK}_spearman"


def display(name: str) -> str:
    """How reports print a table or view name: a public table's display name, anything else (``avg7``, a table of
    yours) as it is."""
    return BY_NAME[name].display if name in BY_NAME else name

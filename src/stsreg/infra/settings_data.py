"""Settings of the data stages (``fetch``, ``prepare``): the raw files, the leakage rule and the scored-pair tables
(public and declared). Each field is a :func:`~stsreg.infra.knobs.knob`; :mod:`stsreg.infra.config` assembles the
sections into ``Params``."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import model_validator

from stsreg.infra import public_tables
from stsreg.infra.knobs import knob, section
from stsreg.infra.scales import check_scale, internal_gap

#: Environment variable that overrides ``fetch.mirror`` (a folder holding the raw files).
MIRROR_ENV = "STSREG_DATA_MIRROR"

@section
class ExtraNLISource:
    """A user-supplied NLI file in the official SNLI/MNLI jsonl format (e.g. full SNLI train)."""

    name: str = knob(help="source name written to the `source` column, e.g. snli", pattern=r"[A-Za-z0-9_]+")
    split: str = knob(help="split name, e.g. train", pattern=r"[A-Za-z0-9_]+")
    file: str = knob(help="path relative to the mirror / data/raw, e.g. NLI/snli_1.0/snli_1.0_train.jsonl")
    sha256: str = knob("", "expected sha256; empty skips the check (not recommended)", pattern=r"([0-9a-f]{64})?")
    url: str = knob("", "upstream URL used when the mirror lacks the file")


@section
class FetchParams:
    mirror: str = knob("../shared/data", f"folder with the raw files; env {MIRROR_ENV} overrides")
    allow_download: bool = knob(True, "download from the upstream URL when the mirror lacks a file")
    extra_nli: tuple[ExtraNLISource, ...] = knob((), "extra NLI jsonl files (full SNLI/MNLI)")


@section
class LeakageParams:
    match: str = knob("normalized", "exact: stripped (s1, s2); normalized: casefolded, spaces collapsed, either order",
                      choices=("normalized", "exact"))
    remove_from_training: bool = knob(False, "drop training pairs that occur in an evaluation test set")


#: Names the public STS tables use (a declared table may not take one); declared in :mod:`stsreg.infra.public_tables`.
PUBLIC_STS_TABLES = public_tables.NAMES
#: Where declared tables live: a folder DVC tracks as a dependency of ``prepare``, so a changed or grown file there
#: reruns the pipeline from ``prepare`` (``dvc repro promote``, the scheduled retrain).
TABLES_DIR = "data/tables"


@section
class StsTableColumns:
    """The user's column names for the three columns a pair needs (and, optionally, its split)."""

    sentence1: str = knob("sentence1", "column holding the first sentence", pattern=r".+")
    sentence2: str = knob("sentence2", "column holding the second sentence", pattern=r".+")
    score: str = knob("score", "column holding the gold similarity, on `scale`", pattern=r".+")
    split: str = knob("", "column holding train / dev / test per row; empty: splits by a stable hash of the pair "
                          "(dev_fraction, test_fraction)")


@section
class StsTableSource:
    """A table of scored sentence pairs: a public benchmark read from the data mirror by its own reader (``reader``:
    its raw files are listed in data/sources.json, its splits are its files), or yours, a ``file`` under
    ``data/tables/`` (CSV, TSV, JSONL or Parquet by extension; splits by a column or a stable hash of each pair).

    Its scores are mapped linearly from ``scale`` to the 0-5 scale the losses, the buffer ``x0`` and the cosine map
    are set on (``rescale: false`` keeps a scale that lies inside 0-5 as annotated, as the paper trains SICK-R's 1-5);
    ``d`` (the gap between the annotation scale's categories) maps with them, and every stage-2 buffer is checked
    against it (``x0 <= d/2``)."""

    name: str = knob(help="table name: a metric prefix and a value of `dataset`; a public table keeps its reader's "
                          "name", pattern=r"[a-z][a-z0-9_]*")
    reader: str = knob("", f"a public benchmark read from the data mirror: {', '.join(PUBLIC_STS_TABLES)}; empty: "
                           f"`file`",
                       choices=("", *PUBLIC_STS_TABLES))
    file: str = knob("", f"path under {TABLES_DIR}/ (e.g. {TABLES_DIR}/support_pairs.csv); empty for a `reader` table")
    columns: StsTableColumns = knob(factory=StsTableColumns)
    scale: tuple[float, ...] = knob((0.0, 5.0), "[lo, hi]: the range of the gold scores as annotated")
    rescale: bool = knob(True, "map the scores linearly from `scale` to 0-5; false: keep them as annotated (a scale "
                               "inside 0-5)")
    d: float = knob(1.0, "gap between adjacent categories of the annotation scale (1 for integer 0-5 ratings; "
                         "averaged gold scores fall between categories)", gt=0)
    dev_fraction: float = knob(0.1, "hash splits: share of pairs in dev", ge=0, lt=1)
    test_fraction: float = knob(0.1, "hash splits: share of pairs in test", ge=0, lt=1)
    quoting: str = knob("auto", "CSV/TSV: rfc4180 (fields quoted as spreadsheets and Python's csv write them), none "
                                "(quotes are text, one record per line), auto (the one that rejects fewer rows, said "
                                "in prepare's log)", choices=("auto", "rfc4180", "none"))
    encoding: str = knob("auto", "text files: auto (a BOM decides, else UTF-8) or a Python codec name (cp1252, ...)",
                         pattern=r"[A-Za-z0-9_-]+")

    def internal_gap(self) -> float:
        """``d`` on the 0-5 scale the losses use (``scale`` a valid [lo, hi])."""
        return internal_gap(self.d, self.scale, self.rescale)

    @model_validator(mode="after")
    def _consistent(self):
        """The rules between this table's own fields, wherever it is built (params.yaml, ``stsreg data check``)."""
        check_scale(self.scale)
        if self.d > self.scale[1] - self.scale[0]:
            raise ValueError(f"d = {self.d:g} is wider than the scale {list(self.scale)}")
        if not self.rescale and not (0.0 <= self.scale[0] and self.scale[1] <= 5.0):
            raise ValueError("rescale: false keeps scores as annotated, so the scale must lie inside 0-5")
        if self.dev_fraction + self.test_fraction >= 1:
            raise ValueError("dev_fraction + test_fraction must leave rows to train on")
        return self


#: The public tables, the default of ``prepare.sts_tables``, with the facts :data:`stsreg.infra.public_tables.PUBLIC`
#: declares (scale, rescale, d).
PUBLIC_TABLES = tuple(StsTableSource(name=t.name, reader=t.name, scale=t.scale, rescale=t.rescale, d=t.d)
                      for t in public_tables.PUBLIC)


#: The NLI ``source/split`` entries available offline (~51k human-labelled pairs): the default of
#: ``prepare.nli_train``.
OFFLINE_NLI = ("snli/dev", "snli/test", "mnli/dev_matched", "xnli/dev", "xnli/test", "anli/dev_r1", "anli/dev_r2",
               "anli/dev_r3", "snli_cad/train", "snli_cad/dev", "snli_cad/test")


@section
class PrepareParams:
    nli_train: tuple[str, ...] = knob(OFFLINE_NLI, "NLI `source/split` entries that feed training (stage 1); see "
                                      "data/nli_sources in README")
    max_rejected_fraction: float = knob(0.01, "stage fails if a dataset rejects more than this fraction of its rows",
                                        ge=0, le=1)
    duplicate_pairs: str = knob("flag", "flag: count exact duplicate pairs within a split but keep them (published "
                                        "test "
                                "sets contain them); reject: keep the first only", choices=("flag", "reject"))
    leakage: LeakageParams = knob(factory=LeakageParams)
    allow_local_edits: bool = knob(False, "prepare raw files whose size or sha256 differs from data/sources.json "
                                   "(listed in the data summary and tagged on training runs); false: refuse them")
    sts_tables: tuple[StsTableSource, ...] = knob(PUBLIC_TABLES, "the scored-pair tables: the 7 public benchmarks "
                                                  "(avg7) and yours, each prepared, split, validated and scored")


def resolve_mirror(params: FetchParams, cli_value: str | None = None, base: Path | None = None) -> Path:
    """Mirror folder: CLI flag, else env ``STSREG_DATA_MIRROR``, else ``fetch.mirror`` (relative to ``base``)."""
    configured = params.mirror  # read unconditionally: DVC tracks fetch.mirror for this stage
    value = cli_value or os.environ.get(MIRROR_ENV) or configured
    path = Path(value).expanduser()
    if not path.is_absolute() and base is not None:
        path = base / path
    return path

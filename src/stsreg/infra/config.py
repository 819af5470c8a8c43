"""Typed parameters: ``params.yaml`` loaded into frozen dataclasses, one section per stage.

Every knob a stage reads is a field here, with its type and range (:func:`knob`); :func:`load_params`
checks them all at load and raises :class:`~stsreg.infra.errors.ParamsError` before any stage touches an output. And ``dvc.yaml`` declares exactly the sections a stage
reads (``tests/unit/test_config.py`` checks both directions), so DVC reruns a stage whenever a knob
it depends on changes.

    >>> from stsreg.infra.config import load_params
    >>> p = load_params("params.yaml")
    >>> p.prepare.max_rejected_fraction
    0.01
"""

from __future__ import annotations

import dataclasses
import json
import operator
import os
import re
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from stsreg.infra import loss_specs, public_tables
from stsreg.infra.scales import internal_gap, valid_scale
from stsreg.infra.errors import ParamsError

#: Environment variable that overrides ``fetch.mirror`` (a folder holding the raw files).
MIRROR_ENV = "STSREG_DATA_MIRROR"


#: Names a stage-2 / stage-1 objective may take: declared in :mod:`stsreg.infra.loss_specs`.
HEAD_LOSSES, STAGE2_LOSSES = loss_specs.HEAD_LOSSES, loss_specs.STAGE2_LOSSES
#: How stage 2 treats the STS labels, and which dev evaluation it keeps.
LABEL_MODES = ("raw", "round", "truncate")
KEEP_MODES = ("best", "trained")
#: Rows of ``compare`` and methods of ``profile`` (their modules hold the specs; a test checks both agree).
COMPARE_METHODS = ("base", "contrast", "cosent", "cosine_mse", "ours", "translated_relu", "mse", "ours_cos", "ours_joint")
PROFILE_METHODS = ("regression_frozen", "regression_full", "contrastive")
#: Rows of the NLI-only table (``stsreg nli-table``): the untouched backbone and one objective per row.
NLI_OBJECTIVES = ("base", "softmax", "mse", "l1", "translated_relu", "smooth_k2", "triplet", "simcse_sup", "simcse_unsup")
#: Systems of the baselines study (``stsreg baselines``; :mod:`stsreg.experiments.baselines` implements each, a test checks both agree).
BASELINE_SYSTEMS = ("word2vec_pretrained", "glove_pretrained", "word2vec_skipgram", "word2vec_cbow", "glove_selftrained",
                    "rnn", "lstm", "lstm_glove", "gru", "infersent", "cls_projection", "cross_linear", "cross_mlp",
                    "sbert", "sllm_full", "sllm_lora")


def knob(default: Any = dataclasses.MISSING, help: str = "", *, factory: Any = dataclasses.MISSING,
         choices: tuple | None = None, ge: float | None = None, gt: float | None = None, le: float | None = None,
         lt: float | None = None, pattern: str | None = None) -> Any:
    """A params field with its help text and the constraints :func:`load_params` checks (for tuples: per element)."""
    meta = {"help": help, "choices": choices, "ge": ge, "gt": gt, "le": le, "lt": lt, "pattern": pattern}
    meta = {k: v for k, v in meta.items() if v is not None and v != ""}
    if factory is not dataclasses.MISSING:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class ExtraNLISource:
    """A user-supplied NLI file in the official SNLI/MNLI jsonl format (e.g. full SNLI train)."""

    name: str = knob(help="source name written to the `source` column, e.g. snli", pattern=r"[A-Za-z0-9_]+")
    split: str = knob(help="split name, e.g. train", pattern=r"[A-Za-z0-9_]+")
    file: str = knob(help="path relative to the mirror / data/raw, e.g. NLI/snli_1.0/snli_1.0_train.jsonl")
    sha256: str = knob("", "expected sha256; empty skips the check (not recommended)", pattern=r"([0-9a-f]{64})?")
    url: str = knob("", "upstream URL used when the mirror lacks the file")


@dataclass(frozen=True)
class FetchParams:
    mirror: str = knob("../shared/data", f"folder with the raw files; env {MIRROR_ENV} overrides")
    allow_download: bool = knob(True, "download from the upstream URL when the mirror lacks a file")
    extra_nli: tuple[ExtraNLISource, ...] = knob((), "extra NLI jsonl files (full SNLI/MNLI)")


@dataclass(frozen=True)
class LeakageParams:
    match: str = knob("normalized", "exact: stripped (s1, s2); normalized: casefolded, spaces collapsed, either order",
                      choices=("normalized", "exact"))
    remove_from_training: bool = knob(False, "drop training pairs that occur in an evaluation test set")


#: Names the public STS tables use (a declared table may not take one); declared in :mod:`stsreg.infra.public_tables`.
PUBLIC_STS_TABLES = public_tables.NAMES
#: Where declared tables live: a folder DVC tracks as a dependency of ``prepare``, so a changed or grown file there
#: reruns the pipeline from ``prepare`` (``dvc repro promote``, the scheduled retrain).
TABLES_DIR = "data/tables"


@dataclass(frozen=True)
class StsTableColumns:
    """The user's column names for the three columns a pair needs (and, optionally, its split)."""

    sentence1: str = knob("sentence1", "column holding the first sentence", pattern=r".+")
    sentence2: str = knob("sentence2", "column holding the second sentence", pattern=r".+")
    score: str = knob("score", "column holding the gold similarity, on `scale`", pattern=r".+")
    split: str = knob("", "column holding train / dev / test per row; empty: splits by a stable hash of the pair "
                          "(dev_fraction, test_fraction)")


@dataclass(frozen=True)
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
    reader: str = knob("", f"a public benchmark read from the data mirror: {', '.join(PUBLIC_STS_TABLES)}; empty: `file`",
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


#: The public tables, the default of ``prepare.sts_tables``, with the facts :data:`stsreg.infra.public_tables.PUBLIC`
#: declares (scale, rescale, d).
PUBLIC_TABLES = tuple(StsTableSource(name=t.name, reader=t.name, scale=t.scale, rescale=t.rescale, d=t.d)
                      for t in public_tables.PUBLIC)


@dataclass(frozen=True)
class PrepareParams:
    nli_train: tuple[str, ...] = knob((), "NLI `source/split` entries that feed training (stage 1); see data/nli_sources in README")
    max_rejected_fraction: float = knob(0.01, "stage fails if a dataset rejects more than this fraction of its rows", ge=0, le=1)
    duplicate_pairs: str = knob("flag", "flag: count exact duplicate pairs within a split but keep them (published test "
                                "sets contain them); reject: keep the first only", choices=("flag", "reject"))
    leakage: LeakageParams = knob(factory=LeakageParams)
    allow_local_edits: bool = knob(False, "prepare raw files whose size or sha256 differs from data/sources.json "
                                   "(listed in the data summary and tagged on training runs); false: refuse them")
    sts_tables: tuple[StsTableSource, ...] = knob(PUBLIC_TABLES, "the scored-pair tables: the 7 public benchmarks "
                                                  "(avg7) and yours, each prepared, split, validated and scored")


@dataclass(frozen=True)
class ModelParams:
    backbone: str = knob("default", "HF name or local path; `default` = packaged all-MiniLM-L6-v2", pattern=r".+")
    pooling: str = knob("mean", "mean | cls", choices=("mean", "cls"))
    max_length: int = knob(128, "max tokens per sentence (training and encoding)", ge=1)
    precision: str = knob("auto", "auto (bf16 where the hardware has it natively and a probe shows the embeddings "
                          "hold) | fp32 | bf16: autocast of encoding, evaluation and stage-2 training",
                          choices=("auto", "fp32", "bf16"))


@dataclass(frozen=True)
class NliTrainingParams:
    """How the whole encoder trains on NLI (:mod:`stsreg.product.training.nli`): the NLI table's rows and stage 1's optional
    encoder step."""

    epochs: int = knob(1, ge=1)
    batch_size: int = knob(16, ge=2)
    lr: float = knob(5e-5, "the top of the paper's NLI range (2e-5 to 5e-5)", gt=0)
    warmup_ratio: float = knob(0.1, ge=0, le=1)
    weight_decay: float = knob(0.01, ge=0)
    max_grad_norm: float = knob(1.0, gt=0)
    x0: float = knob(0.25, "translated_relu / smooth_k2: buffer half-width on the 0/1/2 scale (the paper's)", ge=0)
    k: float = knob(2.0, "translated_relu / smooth_k2: slope outside the buffer", gt=0)
    margin: float = knob(1.0, "triplet: Euclidean margin (Sentence-BERT)", gt=0)
    temperature: float = knob(0.05, "simcse_*: softmax temperature", gt=0)
    group_by_length: bool = knob(False, "batches of examples of similar token length (less padding, faster)")


@dataclass(frozen=True)
class Stage1EncoderParams(NliTrainingParams):
    """Stage 1's optional first step: the whole encoder trained on NLI with one of the NLI table's objectives, then
    frozen for the head. ``none`` is the paper's stage 1 (the encoder stays as given)."""

    objective: str = knob("none", "none | " + " | ".join(NLI_OBJECTIVES[1:]),
                          choices=("none",) + NLI_OBJECTIVES[1:])
    max_pairs: int = knob(0, "examples (0 = all: pairs, triples or sentences, as the objective trains on)", ge=0)


@dataclass(frozen=True)
class Stage1Params:
    """Head-only training on NLI with the encoder frozen (embeddings computed once and cached), after an optional
    encoder step (``encoder``)."""

    loss: str = knob("smooth_k2", " | ".join(HEAD_LOSSES), choices=HEAD_LOSSES)
    x0: float = knob(0.25, "buffer half-width on the 0/1/2 label scale", ge=0)
    k: float = knob(2.0, "slope of the loss outside the buffer", gt=0)
    zero_negative: bool = knob(False, "authors' option: no loss for negative predictions")
    lr: float = knob(1e-3, "paper 5e-5 over ~1M NLI pairs; 1e-3 for the ~51k offline", gt=0)
    batch_size: int = knob(16, ge=1)
    epochs: int = knob(3, ge=1)
    max_pairs: int = knob(0, "sample at most this many NLI pairs (0 = all)", ge=0)
    encode_batch_size: int = knob(64, ge=1)
    encoder: Stage1EncoderParams = knob(factory=Stage1EncoderParams)


@dataclass(frozen=True)
class Stage2Params:
    """Full fine-tuning on STS-B train + SICK-R train; best STS-B dev checkpoint kept."""

    loss: str = knob("smooth_k2_cos", "smooth_k2 | translated_relu | mse | l1 (head) | cosent | cosine_mse (cosine) | "
                     "contrastive | smooth_k2_cos | translated_relu_cos (buffer on cos_a*cos+cos_b) | joint_smooth_k2 | "
                     "joint_translated_relu (head + joint_lambda * cosine)", choices=STAGE2_LOSSES)
    x0: float = knob(0.2, "buffer half-width on the 0-5 label scale", ge=0)
    k: float = knob(3.0, "slope of the loss outside the buffer", gt=0)
    zero_negative: bool = knob(False, "authors' option: no loss for negative predictions")
    temperature: float = knob(0.05, "contrastive: softmax temperature", gt=0)
    contrastive_min_label: float = knob(4.0, "contrastive: pairs scoring >= this are positives")
    labels: str = knob("raw", "raw | round (nearest integer) | truncate (int(score): 3.8 -> 3, the authors' code)",
                       choices=LABEL_MODES)
    cos_a: float = knob(5.0, "*_cos / joint_*: slope of the map a*cos+b from cosine to the label scale", gt=0)
    cos_b: float = knob(0.0, "*_cos / joint_*: offset of that map (a=5, b=0: cosine 1 -> 5, 0 -> 0)")
    joint_lambda: float = knob(1.0, "joint_*: weight of the cosine term", ge=0)
    lr: float = knob(2e-5, "paper 5e-5 (4 epochs on GPU); 2e-5 for the 1-epoch CPU default", gt=0)
    weight_decay: float = knob(0.01, ge=0)
    warmup_ratio: float = knob(0.2, ge=0, le=1)
    layer_decay: float = knob(0.95, "layer-wise lr decay per layer below the top", gt=0, le=1)
    max_grad_norm: float = knob(1.0, gt=0)
    batch_size: int = knob(16, "global batch (split across DDP processes)", ge=1)
    group_by_length: bool = knob(False, "batches of similar-length pairs (less padding, faster)")
    epochs: int = knob(1, ge=1)
    max_train_pairs: int = knob(0, "sample at most this many training pairs (0 = all)", ge=0)
    eval_every: int = knob(200, "STS-B dev Spearman every N optimizer steps (and each epoch end)", ge=1)
    checkpoint_every: int = knob(50, "write a resumable checkpoint every N steps", ge=1)
    eval_batch_size: int = knob(64, ge=1)
    keep: str = knob("best", "best: the best dev evaluation including step 0 (never hands on a model worse than its "
                     "start) | trained: the best after step 0 (the authors' selection)", choices=KEEP_MODES)
    train_tables: tuple[str, ...] = knob(public_tables.TRAINED, "STS tables whose train split stage 2 trains on (public "
                                         "or declared in prepare.sts_tables)", pattern=r"[a-z][a-z0-9_]*")
    dev_table: str = knob(public_tables.DEV_TABLE, "the table whose dev split selects the checkpoint (the only labels any choice reads)",
                          pattern=r"[a-z][a-z0-9_]*")


@dataclass(frozen=True)
class EvaluateParams:
    """The 7-task SentEval "all" evaluation (cosine Spearman) with bootstrap intervals."""

    max_length: int = knob(256, "tokens per sentence at evaluation (protocol: 256)", ge=1)
    batch_size: int = knob(64, ge=1)
    n_resamples: int = knob(1000, "bootstrap resamples for intervals and paired tests", ge=1)
    confidence: float = knob(0.95, gt=0, lt=1)


@dataclass(frozen=True)
class PromoteParams:
    """Gate for moving alias ``champion``: gain >= ``margin`` avg7 points *and* paired bootstrap p < ``alpha``."""

    margin: float = knob(0.1, "avg7 gain in Spearman points")
    alpha: float = knob(0.05, "one-sided paired-bootstrap p-value", gt=0, le=1)
    unseen_only: bool = knob(False, "test on the unseen (leakage-free) test pairs only")
    against_backbone: bool = knob(True, "no champion yet: the challenger must beat the untouched backbone "
                                        "(model.backbone) by the same gate; false: the first version is promoted")
    metrics: tuple[str, ...] = knob(("avg7",), "what the gate judges: avg7 (the 7 public tasks) and/or declared table "
                               "names (their test split); every entry must pass", pattern=r"[a-z][a-z0-9_]*")


@dataclass(frozen=True)
class CompareParams:
    """Base vs +Contrast vs CoSENT vs cosine MSE vs +Ours vs Translated ReLU vs MSE on the same backbone, data and budget."""

    methods: tuple[str, ...] = knob(COMPARE_METHODS, choices=COMPARE_METHODS)
    seeds: tuple[int, ...] = knob((42,), ge=0)
    epochs: int = knob(0, "stage-2 epochs of every trained row (0 = stage2.epochs): the same budget for all rows, "
                       "smaller than production's where seeds x methods would not fit", ge=0)


@dataclass(frozen=True)
class SearchPoint:
    """One stage-2 configuration the search tries before it samples (e.g. the current default); loss-specific
    fields are used only where the loss reads them."""

    loss: str = knob("smooth_k2_cos", choices=STAGE2_LOSSES)
    epochs: int = knob(1, ge=1)
    lr: float = knob(2e-5, gt=0)
    warmup_ratio: float = knob(0.2, ge=0, le=1)
    labels: str = knob("raw", choices=LABEL_MODES)
    group_by_length: bool = knob(False)
    x0: float = knob(0.2, ge=0)
    k: float = knob(3.0, gt=0)
    joint_lambda: float = knob(1.0, ge=0)


@dataclass(frozen=True)
class SearchParams:
    """Optuna search over stage 2 (``stsreg search``), scored on STS-B dev only.

    Ranges are ``[low, high]`` (``lr`` sampled on a log scale); lists of choices are categorical. Every trial
    starts from ``models/stage1`` and uses ``stage2``'s other settings (batch, optimizer, clipping)."""

    trials: int = knob(5, "trials in the study in all (a resumed study counts those already finished)", ge=1)
    minutes: float = knob(30.0, "start no new trial after this many minutes of one invocation", gt=0)
    losses: tuple[str, ...] = knob(("smooth_k2_cos", "joint_smooth_k2", "translated_relu_cos", "cosine_mse"),
                                   choices=STAGE2_LOSSES)
    epochs: tuple[int, ...] = knob((1,), ge=1)
    lr: tuple[float, ...] = knob((1e-5, 1e-4), "[low, high], log scale", gt=0)
    x0: tuple[float, ...] = knob((0.0, 0.5), "[low, high] on the 0-5 label scale", ge=0)
    k: tuple[float, ...] = knob((1.5, 4.0), "[low, high]", gt=0)
    joint_lambda: tuple[float, ...] = knob((0.1, 3.0), "[low, high], joint_* only", ge=0)
    warmup_ratio: tuple[float, ...] = knob((0.05, 0.3), "[low, high]", ge=0, le=1)
    labels: tuple[str, ...] = knob(("raw", "truncate"), choices=LABEL_MODES)
    group_by_length: tuple[bool, ...] = knob((False, True))
    eval_every: int = knob(100, "dev evaluations (and pruning decisions) every N steps", ge=1)
    startup_trials: int = knob(2, "trials before the pruner may stop one (median of the dev curves so far)", ge=0)
    prune_after: int = knob(300, "no pruning before this step: early dev curves cross (warm-up, lr)", ge=0)
    enqueue: tuple[SearchPoint, ...] = knob((), "configurations tried first, before sampling (each once per study)")


@dataclass(frozen=True)
class NliTableParams(NliTrainingParams):
    """NLI-only training of the whole encoder, one row per objective (the paper's Table 1 analogue).

    Every row starts from ``model.backbone`` and gets the same number of examples (``max_pairs``), batch, lr,
    schedule, epochs and max length (``model.max_length``). Pair rows train on sampled (premise, hypothesis, label
    0/1/2); ``triplet`` and ``simcse_sup`` on sampled (premise, entailment, contradiction) triples of the whole
    table; ``simcse_unsup`` on distinct sentences of the sampled pairs (each one twice through dropout)."""

    objectives: tuple[str, ...] = knob(NLI_OBJECTIVES, choices=NLI_OBJECTIVES)
    seeds: tuple[int, ...] = knob((42,), ge=0)
    max_pairs: int = knob(1000, "examples per row and seed (0 = all); sized so that all rows of one seed take "
                                "about half an hour on 2 CPU cores (the 7-task evaluation of each row is most of it)", ge=0)


@dataclass(frozen=True)
class BaselinesParams:
    """The comparative study's systems on STS-B (``stsreg baselines``): trained on STS-B train, selected on STS-B dev
    (Spearman), scored on STS-B test and the 7 tasks. Every trained system fits MSE against label / 5."""

    systems: tuple[str, ...] = knob(BASELINE_SYSTEMS, choices=BASELINE_SYSTEMS)
    word2vec_path: str = knob("", "word2vec-format vectors for word2vec_pretrained (e.g. GoogleNews-vectors-negative300"
                                  ".bin); empty: the row is reported as not run (no such file offline)")
    backbone: str = knob("default", "transformer systems: HF name or local path; default = packaged all-MiniLM-L6-v2")
    max_length: int = knob(128, "transformer systems: tokens per input (a cross-encoder's pair shares it)", ge=8)
    max_train_pairs: int = knob(0, "STS-B train pairs per trained system (0 = all 5,749)", ge=0)
    # word vectors (self-trained on the STS-B / SICK-R train and NLI training sentences)
    word_dim: int = knob(100, ge=2)
    word_window: int = knob(5, "word2vec context window", ge=1)
    word_epochs: int = knob(10, ge=1)
    word_min_count: int = knob(2, ge=1)
    glove_window: int = knob(10, "self-trained GloVe co-occurrence window", ge=1)
    glove_epochs: int = knob(25, ge=1)
    # recurrent encoders
    rnn_dim: int = knob(100, "embedding size of the from-scratch recurrent encoders", ge=2)
    rnn_hidden: int = knob(256, ge=2)
    rnn_epochs: int = knob(10, "the study trains 50 epochs; STS-B dev picks the best epoch", ge=1)
    rnn_lr: float = knob(1e-3, gt=0)
    rnn_batch_size: int = knob(32, ge=2)
    infersent_hidden: int = knob(512, "per direction (InferSent: 2048)", ge=2)
    infersent_nli_pairs: int = knob(0, "NLI pairs of the pre-training (0 = the whole NLI training table)", ge=0)
    infersent_nli_epochs: int = knob(1, ge=1)
    infersent_lr: float = knob(1e-3, gt=0)
    # transformer systems
    epochs: int = knob(1, "transformer systems: epochs over STS-B train", ge=1)
    batch_size: int = knob(32, ge=2)
    lr: float = knob(2e-5, gt=0)
    warmup_ratio: float = knob(0.1, ge=0, le=1)
    eval_every: int = knob(60, "transformer systems: STS-B dev evaluation every N steps (and at each epoch end)", ge=1)
    projection_dim: int = knob(768, "S-LLM rows: Linear(d, projection_dim) + GeLU", ge=1)
    lora_r: int = knob(16, ge=1)
    lora_alpha: int = knob(32, ge=1)
    lora_lr: float = knob(1e-4, "LoRA adapters learn at a higher rate than full fine-tuning", gt=0)
    retrieval_candidates: int = knob(10000, "retrieval cost: candidates scored against one query, both architectures", ge=1)


@dataclass(frozen=True)
class ProfileParams:
    """Memory / step-time grid (the paper's Table 4): each (method, batch, length) in its own subprocess."""

    device: str = knob("auto", "auto (cuda if available) | cpu | cuda | cuda:N", pattern=r"auto|cpu|cuda(:\d+)?")
    methods: tuple[str, ...] = knob(PROFILE_METHODS, choices=PROFILE_METHODS)
    batch_sizes: tuple[int, ...] = knob((8, 32, 64), ge=1)
    lengths: tuple[int, ...] = knob((32, 64, 128, 256), ge=1)
    steps: int = knob(1, "timed optimizer steps per configuration (after one warm-up step)", ge=1)
    headline_batch: int = knob(64, "regression batch of memory_ratio (at headline_length)", ge=1)
    headline_length: int = knob(256, ge=1)
    reference_batch: int = knob(512, "the contrastive point memory_ratio divides by", ge=1)
    reference_length: int = knob(100, ge=1)
    memory_budget_mb: float = knob(12000.0, "configurations predicted above this are not run", gt=0)
    max_step_s: float = knob(30.0, "configurations predicted slower than this per step are not run", gt=0)


@dataclass(frozen=True)
class ScheduleParams:
    """Prefect deployments (``stsreg deploy``): when the retrain and the champion check run, and where."""

    retrain_cron: str = knob("0 3 * * 1", "retrain-and-promote (dvc repro promote); empty = no schedule")
    champion_eval_cron: str = knob("0 6 * * *", "evaluation of the champion; empty = no schedule")
    timezone: str = knob("UTC")
    work_pool: str = knob("stsreg-process", "Prefect work pool the deployments run on", pattern=r".+")
    gpu_pool: str = knob("", "work pool of stage 2 in a scheduled retrain (a GPU machine's worker); empty: stage 2 "
                         "runs with the rest of the pipeline", pattern=r"[A-Za-z0-9_.-]*")
    repo_url: str = knob("", "git URL the gpu_pool worker clones the project from (empty: the remote `origin`)")


@dataclass(frozen=True)
class ServeParams:
    """``stsreg serve`` (and the model card's serving row): how the served model computes."""

    precision: str = knob("auto", "auto (bf16 autocast where the CPU/GPU has native bf16 and a probe shows the "
                          "embeddings hold, else fp32) | fp32 | bf16; `stsreg serve --precision` overrides it",
                          choices=("auto", "fp32", "bf16"))
    scale: tuple[float, ...] = knob((0.0, 5.0), "[lo, hi]: the scale the served `score` is given on (the model's 0-5 "
                                    "score mapped linearly; e.g. [0, 1] for a table declared on 0-1); `stsreg serve "
                                    "--scale LO HI` overrides it")
    backend: str = knob("auto", "what runs the encoder: torch | onnx (fp32, graph-optimised) | onnx-int8 (dynamically "
                        "quantised) | auto (torch on a GPU; on a CPU the fastest, measured at start, of the backends "
                        "the version may serve); `stsreg serve --backend` overrides it",
                        choices=("auto", "torch", "onnx", "onnx-int8"))
    max_avg7_drop: float = knob(0.3, "registration: an exported backend whose avg7 falls more than this below torch's "
                                "is kept out of serving (the reason is a tag on the version)", ge=0)
    workers: int = knob(1, "`stsreg serve` processes (each loads the model)", ge=1)
    threads: int = knob(0, "intra-op threads per process (0: torch's / onnxruntime's default, the cores)", ge=0)
    batch_sentences: int = knob(256, "dynamic batching: sentences of concurrent requests gathered into one encoder "
                                     "call", ge=1)
    batch_wait_ms: float = knob(2.0, "dynamic batching: how long a batch waits for more requests", ge=0, le=1000)
    follow_s: float = knob(10.0, "a server started on an alias (models:/name@champion) polls it this often and serves "
                                 "the version it moves to (loaded and answering before the switch); 0: never", ge=0)


@dataclass(frozen=True)
class LaunchParams:
    """How many processes a stage runs as on one machine (more machines: torchrun by hand, see the README)."""

    stage2_nproc: int = knob(1, "stage 2 processes: >1 runs `stsreg train --stage 2` under torchrun --standalone "
                             "(one process per GPU; gloo processes on CPU); rank 0 writes every output", ge=1)


@dataclass(frozen=True)
class Params:
    seed: int = knob(42, ge=0)
    fetch: FetchParams = knob(factory=FetchParams)
    prepare: PrepareParams = knob(factory=PrepareParams)
    model: ModelParams = knob(factory=ModelParams)
    stage1: Stage1Params = knob(factory=Stage1Params)
    stage2: Stage2Params = knob(factory=Stage2Params)
    evaluate: EvaluateParams = knob(factory=EvaluateParams)
    promote: PromoteParams = knob(factory=PromoteParams)
    compare: CompareParams = knob(factory=CompareParams)
    search: SearchParams = knob(factory=SearchParams)
    nli_table: NliTableParams = knob(factory=NliTableParams)
    baselines: BaselinesParams = knob(factory=BaselinesParams)
    profile: ProfileParams = knob(factory=ProfileParams)
    schedule: ScheduleParams = knob(factory=ScheduleParams)
    launch: LaunchParams = knob(factory=LaunchParams)
    serve: ServeParams = knob(factory=ServeParams)


_TYPE_WORDS = {bool: "a boolean (true/false)", int: "an integer", float: "a float", str: "a string"}


class BareWord(str):
    """A bare ``yes``/``no``/``on``/``off``/``y``/``n`` in params.yaml: a boolean to YAML 1.1, a string to YAML 1.2.

    DVC (ruamel, YAML 1.2) and PyYAML (YAML 1.1) would read such a value differently, so :func:`load_params`
    refuses it in every field, quoting what was written; ``true``/``false`` or a quoted ``'no'`` are unambiguous."""


class _Yaml12Loader(yaml.SafeLoader):
    """PyYAML's safe loader with YAML 1.2's booleans: only true/false (any case) are booleans."""


_Yaml12Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}
_Yaml12Loader.add_implicit_resolver("tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
                                    list("tTfF"))
_Yaml12Loader.add_implicit_resolver("tag:stsreg,2026:bare-word",
                                    re.compile(r"^(?:y|Y|yes|Yes|YES|n|N|no|No|NO|on|On|ON|off|Off|OFF)$"),
                                    list("yYnNoO"))
_Yaml12Loader.add_constructor("tag:stsreg,2026:bare-word", lambda loader, node: BareWord(loader.construct_scalar(node)))
# YAML 1.1 reads `1e-5` (no dot) as a string: a float field accepts such a numeric string, nothing else.
_FLOAT_TEXT = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")


class _Loader:
    """Builds :class:`Params` from the parsed YAML, collecting every problem as ``<file>: <dotted key>: <reason>``."""

    def __init__(self, source: str):
        self.source, self.problems = source, []

    def bad(self, where: str, reason: str) -> None:
        self.problems.append(f"{self.source}: {where}: {reason}")

    def build(self, cls: type, raw: Any, where: str) -> Any:
        if raw is None:
            raw = {}
        if not isinstance(raw, dict):
            self.bad(where or "(top level)", f"expected a mapping of {cls.__name__} keys, got {raw!r:.60}")
            return cls()
        hints = typing.get_type_hints(cls)
        fields = {f.name: f for f in dataclasses.fields(cls)}
        for key in sorted(set(raw) - set(fields), key=str):
            self.bad(f"{where}.{key}" if where else str(key), f"unknown key; {cls.__name__} has {', '.join(fields)}")
        kwargs = {}
        for name in fields.keys() & raw.keys():
            sub = f"{where}.{name}" if where else name
            value = self.value(hints[name], raw[name], sub, fields[name].metadata)
            if value is not _INVALID:
                kwargs[name] = value
        required = [n for n, f in fields.items()
                     if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
        for name in required:
            if name not in raw:
                self.bad(f"{where}.{name}" if where else name, "required key missing")
        if any(name not in kwargs for name in required):
            return _INVALID
        return cls(**kwargs)

    def value(self, tp: Any, raw: Any, where: str, meta: Mapping) -> Any:
        if dataclasses.is_dataclass(tp):
            return self.build(tp, raw, where)
        if typing.get_origin(tp) is tuple:
            (elem, _ellipsis) = typing.get_args(tp)
            if raw is None:
                raw = []
            if not isinstance(raw, list):
                self.bad(where, f"expected a list, got {raw!r:.60}")
                return _INVALID
            items = [self.value(elem, v, f"{where}[{i}]", meta) for i, v in enumerate(raw)]
            return _INVALID if _INVALID in items else tuple(items)
        return self.scalar(tp, raw, where, meta)

    def scalar(self, tp: type, raw: Any, where: str, meta: Mapping) -> Any:
        if isinstance(raw, BareWord):
            self.bad(where, f"bare `{raw}` is ambiguous (a boolean to YAML 1.1, a string to YAML 1.2); expected "
                            f"{_TYPE_WORDS[tp]}: write true/false for a boolean or quote it ('{raw}') for a string")
            return _INVALID
        value = raw
        if tp is float and isinstance(raw, str) and _FLOAT_TEXT.fullmatch(raw.strip()):
            value = float(raw)
        elif tp is float and isinstance(raw, int) and not isinstance(raw, bool):
            value = float(raw)
        # bool is a subclass of int: `true` is not an integer and `1` is not a boolean; no truthy strings either
        if not isinstance(value, tp) or (tp is not bool and isinstance(value, bool)):
            self.bad(where, f"expected {_TYPE_WORDS[tp]}, got {raw!r:.60}")
            return _INVALID
        problem = _check(value, meta)
        if problem:
            self.bad(where, f"{problem}, got {raw!r:.60}")
            return _INVALID
        return value


_INVALID = object()


def _check(value: Any, meta: Mapping) -> str:
    """The first constraint of ``meta`` that ``value`` breaks, as a phrase; empty when it satisfies them all."""
    if "choices" in meta and value not in meta["choices"]:
        return f"expected one of {', '.join(map(str, meta['choices']))}"
    if "pattern" in meta and not re.fullmatch(meta["pattern"], value):
        return f"expected a value matching {meta['pattern']}"
    for key, ok, word in (("ge", operator.ge, ">="), ("gt", operator.gt, ">"), ("le", operator.le, "<="), ("lt", operator.lt, "<")):
        if key in meta and not ok(value, meta[key]):
            return f"expected a value {word} {meta[key]}"
    return ""


#: The buffer of Translated ReLU / Smooth K2 (``x0``, a half-width on the label scale) against ``d``, the gap between
#: adjacent categories of the annotation scale the loss trains on: the paper's condition ``x0 <= d/2``. Field ->
#: (d, the scale it is on). NLI labels are 0/1/2; the search runs on STS-B and SICK-R, whose annotators chose integers
#: on 0-5 / 1-5 (the averaged gold scores fall between them), so d = 1. ``stage2.x0`` is checked against the ``d`` of
#: each table it trains on (:func:`_table_problems`).
BUFFER_GAPS: dict[str, tuple[float, str]] = {
    "stage1.x0": (1.0, "NLI labels 0/1/2"), "stage1.encoder.x0": (1.0, "NLI labels 0/1/2"),
    "nli_table.x0": (1.0, "NLI labels 0/1/2"),
    "search.x0": (1.0, "the 0-5 STS scale's integer categories"),
    "search.enqueue.x0": (1.0, "the 0-5 STS scale's integer categories"),
}


def _buffer_problems(params: Params, source: str) -> list[str]:
    """``x0 > d/2`` for any buffer of :data:`BUFFER_GAPS`, with the paper's reason."""
    problems = []
    for field_path, (gap, scale) in BUFFER_GAPS.items():
        section, *rest = field_path.split(".")
        values: list = [getattr(params, section)]
        for name in rest:
            values = [x for v in values for x in (v if isinstance(v, tuple) else (v,))]
            values = [getattr(v, name) for v in values]
        flat = [x for v in values for x in (v if isinstance(v, tuple) else (v,))]
        bad = [x for x in flat if x > gap / 2]
        if bad:
            problems.append(f"{source}: {field_path}: {max(bad):g} exceeds d/2 = {gap / 2:g} (d = {gap:g}, the gap "
                            f"between adjacent categories of {scale}): the buffer x0 must satisfy x0 <= d/2 (Zhang & "
                            "Li 2024): inside it the loss and its gradient are zero, and a buffer wider than half the gap "
                            "leaves predictions that round to the wrong category unpenalised")
    return problems


def _table_problems(params: Params, source: str) -> list[str]:
    """Declared tables: unique names; a public table under its reader's name, every public one declared (avg7 is
    their mean); your files under :data:`TABLES_DIR` and names no public table or metric uses; valid scales; the
    tables stage 2 and the gate name exist; stage 2's buffer holds on every table it trains on."""
    problems, declared = [], {t.name: t for t in params.prepare.sts_tables}
    for t in params.prepare.sts_tables:
        where = f"{source}: prepare.sts_tables[{t.name}]"
        if t.reader:
            if t.name != t.reader or t.file:
                problems.append(f"{where}: a public table keeps its reader's name ({t.reader!r}) and has no file")
            fact = next(p for p in PUBLIC_TABLES if p.reader == t.reader)
            if (tuple(t.scale), t.d, t.rescale) != (fact.scale, fact.d, fact.rescale):
                problems.append(f"{where}: scale, d and rescale are facts of the public data ({list(fact.scale)}, "
                                f"d {fact.d:g}, rescale {str(fact.rescale).lower()}), got {list(t.scale)}, d {t.d:g}, "
                                f"rescale {str(t.rescale).lower()}: keep params.yaml's entry")
        else:
            if t.name in PUBLIC_STS_TABLES or t.name in ("avg7", "stsb_dev"):
                problems.append(f"{where}: the name {t.name!r} is taken by a public table or metric; choose another")
            if not Path(t.file).as_posix().startswith(TABLES_DIR + "/"):
                problems.append(f"{where}: file {t.file!r} must be under {TABLES_DIR}/ (DVC tracks that folder for "
                                "prepare)")
        if not valid_scale(t.scale):
            problems.append(f"{where}: scale must be [lo, hi] with lo < hi, got {list(t.scale)}")
        elif t.d > t.scale[1] - t.scale[0]:
            problems.append(f"{where}: d = {t.d:g} is wider than the scale {list(t.scale)}")
        elif not t.rescale and not (0.0 <= t.scale[0] and t.scale[1] <= 5.0):
            problems.append(f"{where}: rescale: false keeps scores as annotated, so the scale must lie inside 0-5")
        if t.dev_fraction + t.test_fraction >= 1:
            problems.append(f"{where}: dev_fraction + test_fraction must leave rows to train on")
    if len(declared) != len(params.prepare.sts_tables):
        problems.append(f"{source}: prepare.sts_tables: two tables share a name")
    missing = [n for n in PUBLIC_STS_TABLES if n not in declared]
    if missing:
        problems.append(f"{source}: prepare.sts_tables: the public table(s) {missing} are not declared; avg7 is the "
                        f"mean over all {len(PUBLIC_STS_TABLES)}: keep their entries (params.yaml's defaults) and add yours after them")
    for key, names in (("stage2.train_tables", params.stage2.train_tables), ("stage2.dev_table", (params.stage2.dev_table,)),
                       ("promote.metrics", tuple(n for n in params.promote.metrics if n != "avg7"))):
        unknown = [n for n in names if n not in declared]
        if unknown:
            problems.append(f"{source}: {key}: unknown table(s) {unknown}; known: {sorted(declared)} (declare yours in "
                            "prepare.sts_tables)")
    for name in params.stage2.train_tables:
        t = declared.get(name)
        if t is None or not valid_scale(t.scale):
            continue
        gap = t.internal_gap()
        if params.stage2.x0 > gap / 2:
            problems.append(f"{source}: stage2.x0: {params.stage2.x0:g} exceeds d/2 = {gap / 2:g} for table {name} "
                            f"(d = {t.d:g} on its scale {list(t.scale)}, {gap:g} on the 0-5 scale the losses use): "
                            "the buffer x0 must satisfy x0 <= d/2 (Zhang & Li 2024): inside it the loss and its "
                            "gradient are zero, and a buffer wider than half the gap leaves predictions that round "
                            "to the wrong category unpenalised")
    return problems


def parse_params(raw: Any, source: str = "params.yaml") -> Params:
    """Validate an already parsed params mapping; raises :class:`ParamsError` listing every problem (the types and
    ranges of each field, then the buffers' ``x0 <= d/2``, :data:`BUFFER_GAPS`)."""
    loader = _Loader(source)
    params = loader.build(Params, raw, "")
    if loader.problems:
        raise ParamsError("\n".join(loader.problems))
    problems = _buffer_problems(params, source) + _table_problems(params, source)
    if not valid_scale(params.serve.scale):
        problems.append(f"{source}: serve.scale must be [lo, hi] with lo < hi, got {list(params.serve.scale)}")
    if problems:
        raise ParamsError("\n".join(problems))
    return params


def load_params(path: str | os.PathLike = "params.yaml") -> Params:
    """Load and validate ``params.yaml`` into :class:`Params`; missing keys take defaults.

    Read with YAML 1.2's booleans (only ``true``/``false``); a bare ``yes``/``no``/``on``/``off`` is refused in any
    field (:class:`BareWord`). Unknown keys, wrong types (no coercion: ``'no'`` is not a boolean, ``'fast'`` not a float) and
    out-of-range values raise :class:`ParamsError` (``params.yaml: stage2.lr: expected a float, got 'fast'``),
    all of them in one message. Stages load the whole file, so one bad section stops every stage."""
    name = Path(path).name
    try:
        with open(path, encoding="utf-8") as fh:
            raw = yaml.load(fh, Loader=_Yaml12Loader)  # noqa: S506 (a SafeLoader subclass)
    except FileNotFoundError:
        raise ParamsError(f"{name}: not found at {path}") from None
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise ParamsError(f"{name}: not valid YAML: {exc}") from None
    return parse_params(raw, name)


#: Named sets of overrides (dotted key -> value). ``stsreg preset NAME`` prints them as ``dvc exp run -S`` arguments.
#: ``paper``: the authors' stage 2 (ZBWpro/STS-Regression, code/tune-jina-nomic.py + code/settings.py): lr 5e-5,
#: 4 epochs, global batch 16, warm-up 20%, layer decay 0.95, weight decay 0.01, clipping 10, labels truncated,
#: negative predictions zeroed, Smooth K2 (x0 0.2, k 3), dev every 50 steps, best score reset before stage 2
#: (step 0 never kept), max length 256; stage 1 without the encoder step (the paper's stage 1 trains the head only).
#: ``baselines_gpu``: the comparative study's scale for a GPU machine with a hub: BERT-base transformer rows, 50 epochs
#: for the recurrent encoders, InferSent's 2048 units on the whole NLI table, 300-d self-trained word vectors (GloVe:
#: 25 epochs), 4 transformer epochs.
PRESETS: dict[str, dict[str, Any]] = {
    "paper": {"stage2.loss": "smooth_k2", "stage2.x0": 0.2, "stage2.k": 3.0, "stage2.lr": 5e-5, "stage2.epochs": 4,
              "stage2.batch_size": 16, "stage2.warmup_ratio": 0.2, "stage2.layer_decay": 0.95,
              "stage2.weight_decay": 0.01, "stage2.max_grad_norm": 10.0, "stage2.labels": "truncate",
              "stage2.zero_negative": True, "stage2.eval_every": 50, "stage2.keep": "trained", "model.max_length": 256,
              "stage1.encoder.objective": "none"},
    "baselines_gpu": {"baselines.backbone": "bert-base-uncased", "baselines.epochs": 4, "baselines.rnn_epochs": 50,
                      "baselines.infersent_hidden": 2048, "baselines.infersent_nli_pairs": 0, "baselines.word_dim": 300,
                      "baselines.glove_epochs": 25, "baselines.eval_every": 100},
}


def with_overrides(params: Params, overrides: Mapping[str, Any]) -> Params:
    """``params`` with dotted-key overrides applied and the result validated like ``params.yaml``."""
    raw = dataclasses.asdict(params)
    for key, value in overrides.items():
        *path, leaf = key.split(".")
        node = raw
        for part in path:
            node = node[part]
        node[leaf] = value
    return parse_params(json.loads(json.dumps(raw)), "overrides")  # tuples -> lists, as YAML gives them


def param_keys(cls: type = Params, prefix: str = "") -> set[str]:
    """Dotted names of every leaf field (``prepare.leakage.match`` ...); used to check dvc.yaml."""
    keys: set[str] = set()
    for f in dataclasses.fields(cls):
        ftype = typing.get_type_hints(cls)[f.name]
        name = f"{prefix}{f.name}"
        if dataclasses.is_dataclass(ftype):
            keys |= param_keys(ftype, name + ".")
        else:
            keys.add(name)
    return keys


def resolve_mirror(params: FetchParams, cli_value: str | None = None, base: Path | None = None) -> Path:
    """Mirror folder: CLI flag, else env ``STSREG_DATA_MIRROR``, else ``fetch.mirror`` (relative to ``base``)."""
    configured = params.mirror  # read unconditionally: DVC tracks fetch.mirror for this stage
    value = cli_value or os.environ.get(MIRROR_ENV) or configured
    path = Path(value).expanduser()
    if not path.is_absolute() and base is not None:
        path = base / path
    return path

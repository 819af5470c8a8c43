"""Typed parameters: ``params.yaml`` loaded into frozen dataclasses, one section per stage.

Every knob a stage reads is a field here, and ``dvc.yaml`` declares exactly the sections a stage
reads (``tests/unit/test_config.py`` checks both directions), so DVC reruns a stage whenever a knob
it depends on changes.

    >>> from stsreg.config import load_params
    >>> p = load_params("params.yaml")
    >>> p.prepare.max_rejected_fraction
    0.01
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

#: Environment variable that overrides ``fetch.mirror`` (a folder holding the raw files).
MIRROR_ENV = "STSREG_DATA_MIRROR"


@dataclass(frozen=True)
class ExtraNLISource:
    """A user-supplied NLI file in the official SNLI/MNLI jsonl format (e.g. full SNLI train)."""

    name: str = field(metadata={"help": "source name written to the `source` column, e.g. snli"})
    split: str = field(metadata={"help": "split name, e.g. train"})
    file: str = field(metadata={"help": "path relative to the mirror / data/raw, e.g. NLI/snli_1.0/snli_1.0_train.jsonl"})
    sha256: str = field(default="", metadata={"help": "expected sha256; empty skips the check (not recommended)"})
    url: str = field(default="", metadata={"help": "upstream URL used when the mirror lacks the file"})


@dataclass(frozen=True)
class FetchParams:
    mirror: str = field(default="../shared/data", metadata={"help": f"folder with the raw files; env {MIRROR_ENV} overrides"})
    allow_download: bool = field(default=True, metadata={"help": "download from the upstream URL when the mirror lacks a file"})
    extra_nli: tuple[ExtraNLISource, ...] = field(default=(), metadata={"help": "extra NLI jsonl files (full SNLI/MNLI)"})


@dataclass(frozen=True)
class LeakageParams:
    match: str = field(default="normalized", metadata={"help": "exact: stripped (s1, s2); normalized: casefolded, spaces collapsed, either order"})
    remove_from_training: bool = field(default=False, metadata={"help": "drop training pairs that occur in an evaluation test set"})


@dataclass(frozen=True)
class PrepareParams:
    nli_train: tuple[str, ...] = field(
        default=(),
        metadata={"help": "NLI `source/split` entries that feed training (stage 1); see data/nli_sources in README"},
    )
    max_rejected_fraction: float = field(default=0.01, metadata={"help": "stage fails if a dataset rejects more than this fraction of its rows"})
    duplicate_pairs: str = field(
        default="flag",
        metadata={"help": "flag: count exact duplicate pairs within a split but keep them (published test sets contain them); reject: keep the first only"},
    )
    leakage: LeakageParams = field(default_factory=LeakageParams)


@dataclass(frozen=True)
class ModelParams:
    backbone: str = field(default="default", metadata={"help": "HF name or local path; `default` = packaged all-MiniLM-L6-v2"})
    pooling: str = field(default="mean", metadata={"help": "mean | cls"})
    max_length: int = field(default=128, metadata={"help": "max tokens per sentence (training and encoding)"})


@dataclass(frozen=True)
class Stage1Params:
    """Head-only training on NLI with the encoder frozen (embeddings computed once and cached)."""

    loss: str = field(default="smooth_k2", metadata={"help": "smooth_k2 | translated_relu | mse | l1"})
    x0: float = 0.25
    k: float = 2.0
    zero_negative: bool = False
    lr: float = field(default=1e-3, metadata={"help": "paper 5e-5 over ~1M NLI pairs; 1e-3 for the ~51k offline"})
    batch_size: int = 16
    epochs: int = 3
    max_pairs: int = field(default=0, metadata={"help": "sample at most this many NLI pairs (0 = all)"})
    encode_batch_size: int = 64


@dataclass(frozen=True)
class Stage2Params:
    """Full fine-tuning on STS-B train + SICK-R train; best STS-B dev checkpoint kept."""

    loss: str = field(default="smooth_k2", metadata={
        "help": "smooth_k2 | translated_relu | mse | l1 (head) | cosent | cosine_mse (cosine) | contrastive"})
    x0: float = 0.2
    k: float = 3.0
    zero_negative: bool = False
    temperature: float = field(default=0.05, metadata={"help": "contrastive: softmax temperature"})
    contrastive_min_label: float = field(default=4.0, metadata={"help": "contrastive: pairs scoring >= this are positives"})
    round_labels: bool = field(default=False, metadata={"help": "round STS labels to integers (authors' code)"})
    lr: float = field(default=2e-5, metadata={"help": "paper 5e-5 (4 epochs on GPU); 2e-5 for the 1-epoch CPU default"})
    weight_decay: float = 0.01
    warmup_ratio: float = 0.2
    layer_decay: float = field(default=0.95, metadata={"help": "layer-wise lr decay per layer below the top"})
    max_grad_norm: float = 1.0
    batch_size: int = field(default=16, metadata={"help": "global batch (split across DDP processes)"})
    group_by_length: bool = field(default=False, metadata={"help": "batches of similar-length pairs (less padding, faster)"})
    epochs: int = 1
    max_train_pairs: int = field(default=0, metadata={"help": "sample at most this many training pairs (0 = all)"})
    eval_every: int = field(default=200, metadata={"help": "STS-B dev Spearman every N optimizer steps (and each epoch end)"})
    checkpoint_every: int = field(default=50, metadata={"help": "write a resumable checkpoint every N steps"})
    eval_batch_size: int = 64


@dataclass(frozen=True)
class EvaluateParams:
    """The 7-task SentEval "all" evaluation (cosine Spearman) with bootstrap intervals."""

    max_length: int = field(default=256, metadata={"help": "tokens per sentence at evaluation (protocol: 256)"})
    batch_size: int = 64
    n_resamples: int = field(default=1000, metadata={"help": "bootstrap resamples for intervals and paired tests"})
    confidence: float = 0.95


@dataclass(frozen=True)
class PromoteParams:
    """Gate for moving alias ``champion``: gain >= ``margin`` avg7 points *and* paired bootstrap p < ``alpha``."""

    margin: float = 0.1
    alpha: float = 0.05
    unseen_only: bool = field(default=False, metadata={"help": "test on the unseen (leakage-free) test pairs only"})


@dataclass(frozen=True)
class CompareParams:
    """Base vs +Contrast vs CoSENT vs +Ours vs Translated ReLU vs MSE on the same backbone, data and budget."""

    methods: tuple[str, ...] = ("base", "contrast", "cosent", "ours", "translated_relu", "mse")
    seeds: tuple[int, ...] = (42,)


@dataclass(frozen=True)
class ProfileParams:
    """Memory / step-time grid (the paper's Table 4): each (method, batch, length) in its own subprocess."""

    device: str = field(default="auto", metadata={"help": "auto (cuda if available) | cpu | cuda | cuda:N"})
    methods: tuple[str, ...] = ("regression_frozen", "regression_full", "contrastive")
    batch_sizes: tuple[int, ...] = (8, 32, 64)
    lengths: tuple[int, ...] = (32, 64, 128, 256)
    steps: int = field(default=1, metadata={"help": "timed optimizer steps per configuration (after one warm-up step)"})
    headline_batch: int = field(default=64, metadata={"help": "regression batch of memory_ratio (at headline_length)"})
    headline_length: int = 256
    reference_batch: int = field(default=512, metadata={"help": "the contrastive point memory_ratio divides by"})
    reference_length: int = 100
    memory_budget_mb: float = field(default=12000.0, metadata={"help": "configurations predicted above this are not run"})
    max_step_s: float = field(default=30.0, metadata={"help": "configurations predicted slower than this per step are not run"})


@dataclass(frozen=True)
class ScheduleParams:
    """Prefect deployments (``stsreg deploy``): when the retrain and the champion check run, and where."""

    retrain_cron: str = field(default="0 3 * * 1", metadata={"help": "retrain-and-promote (dvc repro promote); empty = no schedule"})
    champion_eval_cron: str = field(default="0 6 * * *", metadata={"help": "evaluation of the champion; empty = no schedule"})
    timezone: str = "UTC"
    work_pool: str = field(default="stsreg-process", metadata={"help": "Prefect work pool the deployments run on"})


@dataclass(frozen=True)
class Params:
    seed: int = 42
    fetch: FetchParams = field(default_factory=FetchParams)
    prepare: PrepareParams = field(default_factory=PrepareParams)
    model: ModelParams = field(default_factory=ModelParams)
    stage1: Stage1Params = field(default_factory=Stage1Params)
    stage2: Stage2Params = field(default_factory=Stage2Params)
    evaluate: EvaluateParams = field(default_factory=EvaluateParams)
    promote: PromoteParams = field(default_factory=PromoteParams)
    compare: CompareParams = field(default_factory=CompareParams)
    profile: ProfileParams = field(default_factory=ProfileParams)
    schedule: ScheduleParams = field(default_factory=ScheduleParams)


def _build(cls: type, raw: Any, where: str) -> Any:
    """Build dataclass ``cls`` from a mapping, rejecting unknown keys with their dotted path."""
    if not dataclasses.is_dataclass(cls):
        return raw
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ValueError(f"params: `{where}` must be a mapping, got {type(raw).__name__}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(raw) - set(fields))
    if unknown:
        raise ValueError(f"params: unknown key(s) {', '.join(where + '.' + k if where else k for k in unknown)}")
    kwargs = {}
    for name, value in raw.items():
        f = fields[name]
        sub = f"{where}.{name}" if where else name
        ftype = f.type if not isinstance(f.type, str) else _resolve(f.type)
        if dataclasses.is_dataclass(ftype):
            kwargs[name] = _build(ftype, value, sub)
        elif name == "extra_nli":
            kwargs[name] = tuple(_build(ExtraNLISource, v, f"{sub}[{i}]") for i, v in enumerate(value or []))
        elif isinstance(value, list):
            kwargs[name] = tuple(value)
        else:
            kwargs[name] = value
    return cls(**kwargs)


def _resolve(type_name: str) -> Any:
    return globals().get(type_name, type_name)


def load_params(path: str | os.PathLike = "params.yaml") -> Params:
    """Load ``params.yaml`` into :class:`Params`; unknown keys are an error, missing keys take defaults."""
    with open(path, encoding="utf-8") as fh:
        raw = yaml.safe_load(fh) or {}
    return _build(Params, raw, "")


def param_keys(cls: type = Params, prefix: str = "") -> set[str]:
    """Dotted names of every leaf field (``prepare.leakage.match`` ...); used to check dvc.yaml."""
    keys: set[str] = set()
    for f in dataclasses.fields(cls):
        ftype = f.type if not isinstance(f.type, str) else _resolve(f.type)
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

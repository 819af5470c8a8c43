"""Typed parameters: ``params.yaml`` loaded into frozen pydantic dataclasses, one section per stage.

The sections live in the settings module of what reads them (``settings_data``, ``settings_training``,
``settings_experiments``, ``settings_operations``); every field is a :func:`~stsreg.infra.knobs.knob` whose type
carries its range and choices, so pydantic checks each key, type and range wherever a section is built. This module
assembles them into :class:`Params`, adds the rules between sections (the buffers' ``x0 <= d/2``, the declared
tables), and :func:`load_params` raises one :class:`~stsreg.infra.errors.ParamsError` listing every problem before any
stage touches an output. And ``dvc.yaml`` declares exactly the sections a stage reads (``tests/unit/test_config.py``
checks both directions), so DVC reruns a stage whenever a knob it depends on changes.

    >>> from stsreg.infra.config import load_params
    >>> p = load_params("params.yaml")
    >>> p.prepare.max_rejected_fraction
    0.01
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import TypeAdapter, ValidationError

from stsreg.infra import knobs, public_tables
from stsreg.infra.errors import ParamsError
from stsreg.infra.knobs import Yaml12Loader, knob, section
from stsreg.infra.settings_data import (MIRROR_ENV, PUBLIC_STS_TABLES, PUBLIC_TABLES, TABLES_DIR, ExtraNLISource,
                                        FetchParams, LeakageParams, PrepareParams, StsTableColumns, StsTableSource,
                                        resolve_mirror)
from stsreg.infra.settings_experiments import (BASELINE_SYSTEMS, COMPARE_METHODS, PROFILE_METHODS, BaselinesParams,
                                               CompareParams, ProfileParams, SearchParams, SearchPoint, NliTableParams)
from stsreg.infra.settings_operations import LaunchParams, ScheduleParams, ServeParams
from stsreg.infra.settings_training import (HEAD_LOSSES, KEEP_MODES, LABEL_MODES, NLI_OBJECTIVES, STAGE2_LOSSES,
                                            EvaluateParams, ModelParams, NliTrainingParams, PromoteParams,
                                            Stage1EncoderParams, Stage1Params, Stage2Params,
                                            Stage2WarmStartParams)

#: The sections' names, read from here by the rest of the code (each is declared in the settings module of its owner).
__all__ = ["MIRROR_ENV", "PUBLIC_STS_TABLES", "PUBLIC_TABLES", "TABLES_DIR", "ExtraNLISource", "FetchParams",
           "LeakageParams", "PrepareParams", "StsTableColumns", "StsTableSource", "resolve_mirror", "BASELINE_SYSTEMS",
           "COMPARE_METHODS", "PROFILE_METHODS", "BaselinesParams", "CompareParams", "ProfileParams", "SearchParams",
           "SearchPoint", "NliTableParams", "LaunchParams", "ScheduleParams", "ServeParams", "HEAD_LOSSES",
           "KEEP_MODES",
           "LABEL_MODES", "NLI_OBJECTIVES", "STAGE2_LOSSES", "EvaluateParams", "ModelParams", "NliTrainingParams",
           "PromoteParams", "Stage1EncoderParams", "Stage1Params", "Stage2Params", "Stage2WarmStartParams", "Params",
           "ParamsError",
           "BUFFER_GAPS",
           "PRESETS", "load_params", "parse_params", "with_overrides", "param_keys"]


@section
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

#: Why a buffer wider than half the gap is refused, said with every such problem.
_BUFFER_RULE = ("the buffer x0 must satisfy x0 <= d/2 (Zhang & Li 2024): inside it the loss and its gradient are zero, "
                "and a buffer wider than half the gap leaves predictions that round to the wrong category unpenalised")


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
                            f"between adjacent categories of {scale}): {_BUFFER_RULE}")
    return problems


def _table_problems(params: Params, source: str) -> list[str]:
    """Declared tables: unique names; a public table under its reader's name, every public one declared (avg7 is
    their mean); your files under :data:`TABLES_DIR` and names no public table or metric uses; the
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
            if t.name in PUBLIC_STS_TABLES or t.name in ("avg7", public_tables.DEV_TASK):
                problems.append(f"{where}: the name {t.name!r} is taken by a public table or metric; choose another")
            if not Path(t.file).as_posix().startswith(TABLES_DIR + "/"):
                problems.append(f"{where}: file {t.file!r} must be under {TABLES_DIR}/ (DVC tracks that folder for "
                                "prepare)")
    if len(declared) != len(params.prepare.sts_tables):
        problems.append(f"{source}: prepare.sts_tables: two tables share a name")
    missing = [n for n in PUBLIC_STS_TABLES if n not in declared]
    if missing:
        problems.append(f"{source}: prepare.sts_tables: the public table(s) {missing} are not declared; avg7 is the "
                        f"mean over all {len(PUBLIC_STS_TABLES)}: keep their entries (params.yaml's defaults) and add "
                        "yours after them")
    for key, names in (("stage2.train_tables", params.stage2.train_tables),
                       ("stage2.dev_table", (params.stage2.dev_table,)),
                       ("promote.metrics", tuple(n for n in params.promote.metrics if n != "avg7")),
                       ("promote.guards", tuple(n for n in params.promote.guards if n != "avg7"))):
        unknown = [n for n in names if n not in declared]
        if unknown:
            problems.append(f"{source}: {key}: unknown table(s) {unknown}; known: {sorted(declared)} (declare yours in "
                            "prepare.sts_tables)")
    if both := sorted(set(params.promote.metrics) & set(params.promote.guards)):
        problems.append(f"{source}: promote.guards: {both} also in promote.metrics; a metric is either an objective "
                        "(must gain) or a guard (may not drop by more than its bound)")
    for name in params.stage2.train_tables:
        t = declared.get(name)
        if t is None:  # an unknown name, reported above (a declared table's scale is valid: its own rule)
            continue
        gap = t.internal_gap()
        if params.stage2.x0 > gap / 2:
            problems.append(f"{source}: stage2.x0: {params.stage2.x0:g} exceeds d/2 = {gap / 2:g} for table {name} (d "
                            f"= {t.d:g} on its scale {list(t.scale)}, {gap:g} on the 0-5 scale the losses use): "
                            f"{_BUFFER_RULE}")
    return problems


_PARAMS = TypeAdapter(Params)


def parse_params(raw: Any, source: str = "params.yaml") -> Params:
    """Validate an already parsed params mapping; raises :class:`ParamsError` listing every problem (the types and
    ranges of each field, then the buffers' ``x0 <= d/2``, :data:`BUFFER_GAPS`)."""
    try:
        params = _PARAMS.validate_python(raw)
    except ValidationError as exc:
        raise ParamsError("\n".join(knobs.problems(exc, Params, source))) from None
    problems = _buffer_problems(params, source) + _table_problems(params, source)
    if problems:
        raise ParamsError("\n".join(problems))
    return params


def load_params(path: str | os.PathLike = "params.yaml") -> Params:
    """Load and validate ``params.yaml`` into :class:`Params`; missing keys take defaults.

    Read with YAML 1.2's booleans (only ``true``/``false``); a bare ``yes``/``no``/``on``/``off`` is refused in any
    field (:class:`stsreg.infra.knobs.BareWord`). Unknown keys, wrong types (no coercion: ``'no'`` is not a boolean,
    ``'fast'`` not a float) and out-of-range values raise :class:`ParamsError` (``params.yaml: stage2.lr: expected a
    float, got 'fast'``), all of them in one message. Stages load the whole file, so one bad section stops every
    stage."""
    name = Path(path).name
    try:
        text = Path(path).read_bytes()
    except FileNotFoundError:
        raise ParamsError(f"{name}: not found at {path}") from None
    return _parsed(text, name)


@functools.lru_cache(maxsize=8)
def _parsed(text: bytes, name: str) -> Params:
    """One file's content parsed and validated once per process: the command layer, the flow and its tasks each ask
    for the params of a command and get the same frozen object (a changed file is other bytes, parsed anew)."""
    try:
        raw = yaml.load(text.decode("utf-8"), Loader=Yaml12Loader)  # noqa: S506 (a SafeLoader subclass)
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



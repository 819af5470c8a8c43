"""Settings of the product's training and release stages: the model, stage 1 (its optional NLI encoder step and the
head), stage 2, the evaluation and the promotion gate."""

from __future__ import annotations

from stsreg.infra import loss_specs, method_specs, public_tables
from stsreg.infra.knobs import add_knobs, knob, section

#: Names a stage-2 / stage-1 objective may take: declared in :mod:`stsreg.infra.loss_specs`.
HEAD_LOSSES, STAGE2_LOSSES = loss_specs.HEAD_LOSSES, loss_specs.STAGE2_LOSSES
#: How stage 2 treats the STS labels, and which dev evaluation it keeps.
LABEL_MODES = ("raw", "round", "truncate")
KEEP_MODES = ("best", "trained")
#: Rows of the NLI-only table (``stsreg nli-table``): declared in :mod:`stsreg.infra.method_specs`.
NLI_OBJECTIVES = method_specs.NLI_OBJECTIVES


@section
class ModelParams:
    backbone: str = knob("default", "HF name or local path; `default` = packaged all-MiniLM-L6-v2", pattern=r".+")
    pooling: str = knob("mean", "mean | cls", choices=("mean", "cls"))
    max_length: int = knob(128, "max tokens per sentence (training and encoding)", ge=1)
    precision: str = knob("auto", "auto (bf16 where the hardware has it natively and a probe shows the embeddings "
                          "hold) | fp32 | bf16: autocast of encoding, evaluation and stage-2 training",
                          choices=("auto", "fp32", "bf16"))


@section
class NliTrainingParams:
    """How the whole encoder trains on NLI (:mod:`stsreg.product.training.nli`): the NLI table's rows and stage 1's
    optional encoder step."""

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


@section
class Stage1EncoderParams(NliTrainingParams):
    """Stage 1's optional first step: the whole encoder trained on NLI with one of the NLI table's objectives, then
    frozen for the head. ``none`` is the paper's stage 1 (the encoder stays as given)."""

    objective: str = knob("simcse_sup", "none | " + " | ".join(NLI_OBJECTIVES[1:]),
                          choices=("none",) + NLI_OBJECTIVES[1:])
    max_pairs: int = knob(0, "examples (0 = all: pairs, triples or sentences, as the objective trains on)", ge=0)


@section
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


@section
class Stage2WarmStartParams:
    """A retrain that continues the pinned champion (``champion.json``, :mod:`stsreg.product.champion_pin`) instead of
    starting from ``models/stage1`` (:mod:`stsreg.product.runners.warm_start`): for ``epochs`` at ``lr``, every new
    row and a replay of old rows sized from them (``task_replay`` of your task's table and ``other_replay`` of the
    others, per new row), judged on the dev split ``evals`` times. With no champion pinned, or one of another
    backbone, stage 2 starts from stage 1 and says why."""

    enabled: bool = knob(True, "true: start from the pinned champion when there is one of model.backbone, else from "
                               "stage 1 (the run says which and why); false: always from stage 1")
    epochs: int = knob(1, "epochs of a warm retrain (replaces stage2.epochs)", ge=1)
    lr: float = knob(2e-5, "peak lr of a warm retrain (replaces stage2.lr): the cold one; at half of it a warm run "
                           "of a few hundred steps left the champion where it was", gt=0)
    task_replay: float = knob(2.0, "old rows of your task's table (stage2.dev_table) replayed per new row, at most "
                                   "all of them", ge=0)
    other_replay: float = knob(4.0, "old rows of the other train tables (the public ones) replayed per new row, at "
                                    "most all of them", ge=0)
    evals: int = knob(10, "dev evaluations spread evenly over a warm retrain (replaces stage2.eval_every), so its "
                          "selection has a curve to choose from however few steps it runs", ge=1)


@section
@add_knobs(loss_specs.stage2_fields(), after="loss")
class Stage2Params:
    """Full fine-tuning on STS-B train + SICK-R train; best STS-B dev checkpoint kept. The knobs of the losses (``x0``,
    ``k``, ``cos_a``, ...) follow ``loss``: declared with their defaults and help in :mod:`stsreg.infra.loss_specs`."""

    loss: str = knob("smooth_k2_cos", "; ".join(f"{n}: {s.help}" for n, s in loss_specs.LOSSES.items()),
                     choices=STAGE2_LOSSES)
    labels: str = knob("raw", "raw | round (nearest integer) | truncate (int(score): 3.8 -> 3, the authors' code)",
                       choices=LABEL_MODES)
    lr: float = knob(2e-5, "paper 5e-5 (4 epochs on GPU); 2e-5 for the 1-epoch CPU default", gt=0)
    weight_decay: float = knob(0.01, ge=0)
    warmup_ratio: float = knob(0.2, ge=0, le=1)
    layer_decay: float = knob(0.95, "layer-wise lr decay per layer below the top", gt=0, le=1)
    max_grad_norm: float = knob(1.0, gt=0)
    batch_size: int = knob(16, "global batch (split across DDP processes)", ge=1)
    group_by_length: bool = knob(True, "batches of similar-length pairs (less padding, faster)")
    epochs: int = knob(3, ge=1)
    max_train_pairs: int = knob(0, "sample at most this many training pairs (0 = all)", ge=0)
    eval_every: int = knob(200, "STS-B dev Spearman every N optimizer steps (and each epoch end)", ge=1)
    checkpoint_every_s: float = knob(120.0, "write a resumable checkpoint once this many seconds passed since the "
                                     "last (and at each epoch end); 0: every step", ge=0)
    eval_batch_size: int = knob(64, ge=1)
    keep: str = knob("best", "best: the best dev evaluation including step 0 (never hands on a model worse than its "
                     "start) | trained: the best after step 0 (the authors' selection)", choices=KEEP_MODES)
    train_tables: tuple[str, ...] = knob(public_tables.TRAINED, "STS tables whose train split stage 2 trains on "
                                                                "(public "
                                         "or declared in prepare.sts_tables)", pattern=r"[a-z][a-z0-9_]*")
    dev_table: str = knob(public_tables.DEV_TABLE, "the table whose dev split selects the checkpoint (the only labels "
                                                   "any choice reads)",
                          pattern=r"[a-z][a-z0-9_]*")
    warm_start: Stage2WarmStartParams = knob(factory=Stage2WarmStartParams)


@section
class EvaluateParams:
    """The 7-task SentEval "all" evaluation (cosine Spearman) with bootstrap intervals."""

    max_length: int = knob(256, "tokens per sentence at evaluation (protocol: 256)", ge=1)
    batch_size: int = knob(64, ge=1)
    n_resamples: int = knob(1000, "bootstrap resamples for intervals and paired tests", ge=1)
    confidence: float = knob(0.95, gt=0, lt=1)


@section
class PromoteParams:
    """Gate for moving alias ``champion``: every objective of ``metrics`` gains >= ``margin`` Spearman points *and*
    the paired bootstrap's p < ``alpha``; every metric of ``guards`` may drop, but not by more than its bound (the
    gain's 95% lower bound >= -bound). E.g. ``metrics: [qa]`` with ``guards: {avg7: 0.3}``: promoted when the user's
    table gains, as long as the public benchmarks do not lose more than 0.3 points."""

    margin: float = knob(0.1, "the gain each objective of metrics needs, in Spearman points")
    alpha: float = knob(0.05, "one-sided paired-bootstrap p-value", gt=0, le=1)
    unseen_only: bool = knob(False, "test on the unseen (leakage-free) test pairs only")
    against_backbone: bool = knob(True, "no champion yet: the challenger must beat the untouched backbone "
                                        "(model.backbone) by the same gate; false: the first version is promoted")
    metrics: tuple[str, ...] = knob(("avg7",), "what the gate judges: avg7 (the 7 public tasks) and/or declared table "
                               "names (their test split); every entry must pass", pattern=r"[a-z][a-z0-9_]*")
    guards: dict[str, float] = knob(factory=dict, help="metrics that may not drop by more than their bound in Spearman "
                                    "points, judged on the gain's lower confidence bound (avg7 and/or declared table "
                                    "names; none by default), e.g. {avg7: 0.3}", ge=0, pattern=r"[a-z][a-z0-9_]*")

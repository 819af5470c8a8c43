"""Settings of the experiments: the comparison, the stage-2 search, the NLI-only table, the baselines study and the
memory / step-time profile."""

from __future__ import annotations

from stsreg.infra import baseline_specs, loss_specs, method_specs
from stsreg.infra.knobs import add_knobs, knob, section
from stsreg.infra.settings_training import LABEL_MODES, NLI_OBJECTIVES, STAGE2_LOSSES, NliTrainingParams

#: Rows of ``compare``: declared in :mod:`stsreg.infra.method_specs`.
COMPARE_METHODS = method_specs.COMPARE_METHODS
#: Steps of ``profile``: declared in :mod:`stsreg.infra.method_specs`.
PROFILE_METHODS = method_specs.PROFILE_METHODS
#: Systems of the baselines study (``stsreg baselines``): declared in :mod:`stsreg.infra.baseline_specs`.
BASELINE_SYSTEMS = baseline_specs.BASELINE_SYSTEMS


@section
class CompareParams:
    """Base vs +Contrast vs CoSENT vs cosine MSE vs +Ours vs Translated ReLU vs MSE on the same backbone, data and
    budget."""

    methods: tuple[str, ...] = knob(method_specs.DEFAULT_COMPARE, choices=COMPARE_METHODS)
    seeds: tuple[int, ...] = knob((42, 43, 44), ge=0)
    epochs: int = knob(1, "stage-2 epochs of every trained row (0 = stage2.epochs): the same budget for all rows, "
                       "smaller than production's where seeds x methods would not fit", ge=0)


@section
@add_knobs(loss_specs.point_fields(), after="group_by_length")
class SearchPoint:
    """One stage-2 configuration the search tries before it samples (e.g. the current default); loss-specific
    fields are used only where the loss reads them."""

    loss: str = knob("smooth_k2_cos", choices=STAGE2_LOSSES)
    epochs: int = knob(1, ge=1)
    lr: float = knob(2e-5, gt=0)
    warmup_ratio: float = knob(0.2, ge=0, le=1)
    labels: str = knob("raw", choices=LABEL_MODES)
    group_by_length: bool = knob(False)


@section
@add_knobs(loss_specs.search_fields(), after="lr")
class SearchParams:
    """Optuna search over stage 2 (``stsreg search``), scored on STS-B dev only.

    Ranges are ``[low, high]`` (``lr`` sampled on a log scale); lists of choices are categorical. Every trial
    starts from ``models/stage1`` and uses ``stage2``'s other settings (batch, optimizer, clipping)."""

    trials: int = knob(10, "trials in the study in all (a resumed study counts those already finished)", ge=1)
    minutes: float = knob(30.0, "start no new trial after this many minutes of one invocation", gt=0)
    losses: tuple[str, ...] = knob(("smooth_k2_cos", "joint_smooth_k2", "translated_relu_cos", "cosine_mse"),
                                   choices=STAGE2_LOSSES)
    epochs: tuple[int, ...] = knob((1,), ge=1)
    lr: tuple[float, ...] = knob((1e-5, 1e-4), "[low, high], log scale", gt=0)
    warmup_ratio: tuple[float, ...] = knob((0.05, 0.3), "[low, high]", ge=0, le=1)
    labels: tuple[str, ...] = knob(("raw", "truncate"), choices=LABEL_MODES)
    group_by_length: tuple[bool, ...] = knob((False, True))
    eval_every: int = knob(100, "dev evaluations (and pruning decisions) every N steps", ge=1)
    startup_trials: int = knob(2, "trials before the pruner may stop one (median of the dev curves so far)", ge=0)
    prune_after: int = knob(300, "no pruning before this step: early dev curves cross (warm-up, lr)", ge=0)
    enqueue: tuple[SearchPoint, ...] = knob((SearchPoint(),), "configurations tried first, before sampling (each once "
                                                              "per study)")


@section
class NliTableParams(NliTrainingParams):
    """NLI-only training of the whole encoder, one row per objective (the paper's Table 1 analogue).

    Every row starts from ``model.backbone`` and gets the same number of examples (``max_pairs``), batch, lr,
    schedule, epochs and max length (``model.max_length``). Pair rows train on sampled (premise, hypothesis, label
    0/1/2); ``triplet`` and ``simcse_sup`` on sampled (premise, entailment, contradiction) triples of the whole
    table; ``simcse_unsup`` on distinct sentences of the sampled pairs (each one twice through dropout)."""

    objectives: tuple[str, ...] = knob(NLI_OBJECTIVES, choices=NLI_OBJECTIVES)
    seeds: tuple[int, ...] = knob((42,), ge=0)
    max_pairs: int = knob(1000, "examples per row and seed (0 = all); sized so that all rows of one seed take "
                                "about half an hour on 2 CPU cores (the 7-task evaluation of each row is most of it)",
                                ge=0)


@section
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
    glove_epochs: int = knob(15, ge=1)
    # recurrent encoders
    rnn_dim: int = knob(100, "embedding size of the from-scratch recurrent encoders", ge=2)
    rnn_hidden: int = knob(256, ge=2)
    rnn_epochs: int = knob(6, "the study trains 50 epochs; STS-B dev picks the best epoch", ge=1)
    rnn_lr: float = knob(1e-3, gt=0)
    rnn_batch_size: int = knob(32, ge=2)
    infersent_hidden: int = knob(512, "per direction (InferSent: 2048)", ge=2)
    infersent_nli_pairs: int = knob(20000, "NLI pairs of the pre-training (0 = the whole NLI training table)", ge=0)
    infersent_nli_epochs: int = knob(1, ge=1)
    infersent_lr: float = knob(1e-3, gt=0)
    # transformer systems
    epochs: int = knob(1, "transformer systems: epochs over STS-B train", ge=1)
    batch_size: int = knob(32, ge=2)
    lr: float = knob(2e-5, gt=0)
    warmup_ratio: float = knob(0.1, ge=0, le=1)
    eval_every: int = knob(90, "transformer systems: STS-B dev evaluation every N steps (and at each epoch end)", ge=1)
    projection_dim: int = knob(768, "S-LLM rows: Linear(d, projection_dim) + GeLU", ge=1)
    lora_r: int = knob(16, ge=1)
    lora_alpha: int = knob(32, ge=1)
    lora_lr: float = knob(1e-4, "LoRA adapters learn at a higher rate than full fine-tuning", gt=0)
    retrieval_candidates: int = knob(10000, "retrieval cost: candidates scored against one query, both architectures",
                                     ge=1)


@section
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

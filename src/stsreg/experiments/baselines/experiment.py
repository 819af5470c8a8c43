"""The baselines experiment: build each system, train it on STS-B train, select on STS-B dev, score it.

Every system is scored on the evaluation stage's pairs (the 7 test sets + STS-B dev) with its own similarity (the
cosine of a bi-encoder, the sigmoid of a cross-encoder), so every row gets the 7-task protocol in both views; and on
STS-B test as the study reports it: Pearson and Spearman (x100 here, the study's fractions x100 beside them) with 95%
pair-bootstrap intervals, and the MSE of the score against label / 5.

    >>> run_system(params, "lstm", sts, nli, Path("reports/baselines/runs/lstm"))  # -> metrics dict
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import torch

from stsreg.experiments.baselines.fit import FitConfig, fit
from stsreg.experiments.baselines.metrics import metrics_of, score_table
from stsreg.experiments.baselines.scoring import PairScorer
from stsreg.experiments.row_results import Unavailable  # a system that cannot run here: its row says why
from stsreg.infra import atomic
from stsreg.infra.baseline_specs import SYSTEMS
from stsreg.infra.config import Params
from stsreg.infra.public_tables import BASELINES_TABLE
from stsreg.experiments.baselines import recurrent, wordvec
from stsreg.experiments.baselines.encoders import CrossEncoder, TransformerBiEncoder, set_precision
from stsreg.experiments.baselines.recurrent import pretrain_on_nli
from stsreg.experiments.baselines.wordvec import AveragedWordVectors
from stsreg.product.data.catalogue import sample_pairs, table_split

log = logging.getLogger(__name__)


#: Settings a system reads from outside the ``baselines`` section: name -> (section, key).
_OUTSIDE = {"precision": ("model", "precision")}  # the project's autocast mode (stsreg.product.precision)


def settings(params: Params, name: str) -> dict:
    """The settings system ``name`` reads (name -> value; from the ``baselines`` section, and ``precision`` from
    ``model``): its run's key and its logged params. Changing a setting reruns only the systems that read it."""
    out = {}
    for key in SYSTEMS[name].reads:
        section, attr = _OUTSIDE.get(key, ("baselines", key))
        out[key] = getattr(getattr(params, section), attr)
    return out


def _view(params: Params, name: str) -> SimpleNamespace:
    """The only view of the params a system's code gets: a setting it does not declare is an AttributeError, so
    :attr:`System.reads` (and so the run's key) cannot miss one."""
    return SimpleNamespace(**settings(params, name))


def study_splits(sts: pd.DataFrame, max_train_pairs: int, seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(STS-B train, STS-B dev) rows of the prepared STS table (sentence1, sentence2, score 0-5); train sampled to
    ``max_train_pairs`` (0 = all) with ``seed``."""
    return (sample_pairs(table_split(sts, BASELINES_TABLE, "train"), max_train_pairs, seed),
            table_split(sts, BASELINES_TABLE, "dev"))


def _word_vectors(name: str, p, sts: pd.DataFrame, nli: pd.DataFrame, seed: int, work: Path):
    if name == "glove_pretrained":
        return wordvec.load_glove_6b_50d()
    if name == "word2vec_pretrained":
        if not p.word2vec_path:
            raise Unavailable("no word2vec file: set baselines.word2vec_path (the GoogleNews vectors are not "
                              "available offline)")
        if not Path(p.word2vec_path).exists():
            raise Unavailable(f"baselines.word2vec_path {p.word2vec_path!r} does not exist")
        return wordvec.load_word2vec_format(p.word2vec_path)
    cached = work / "vectors"
    if cached.with_suffix(".source").exists():  # trained before a crash later in the row (.source is saved last)
        return wordvec.WordVectors.load(cached)
    sentences = wordvec.corpus(sts, nli)
    if name == "glove_selftrained":
        cfg = wordvec.GloveConfig(p.word_dim, p.glove_window, p.glove_epochs, p.word_min_count)
        vectors = wordvec.train_glove(sentences, cfg, seed)
    else:
        vectors = wordvec.train_word2vec(sentences, name == "word2vec_skipgram", p.word_dim, p.word_window,
                                         p.word_epochs, p.word_min_count, seed)
    work.mkdir(parents=True, exist_ok=True)
    vectors.save(cached)
    return vectors


def build(name: str, params: Params, sts: pd.DataFrame, nli: pd.DataFrame, work: Path) -> tuple[PairScorer,
                                                                                                FitConfig | None]:
    """The system ``name`` before STS-B training, and how to train it (None: nothing to train)."""
    p, seed = _view(params, name), params.seed
    torch.manual_seed(seed)  # every initialisation below draws from the global RNG
    if SYSTEMS[name].family == "word vectors":
        return AveragedWordVectors(_word_vectors(name, p, sts, nli, seed, work)), None
    if SYSTEMS[name].family == "recurrent":
        cfg = FitConfig(epochs=p.rnn_epochs, batch_size=p.rnn_batch_size, lr=p.rnn_lr, weight_decay=0.0,
                        warmup_ratio=0.0,
                        max_grad_norm=5.0, eval_every=0, checkpoint_every=100)
        if name == "infersent":
            return recurrent.RecurrentEncoder("lstm", p.infersent_hidden, glove=wordvec.load_glove_6b_50d(),
                                              bidirectional=True, pooling="max"), cfg
        if name == "lstm_glove":
            return recurrent.RecurrentEncoder("lstm", p.rnn_hidden, glove=wordvec.load_glove_6b_50d()), cfg
        vocab = recurrent.build_vocab(wordvec.corpus(sts, nli))
        return recurrent.RecurrentEncoder(name, p.rnn_hidden, vocab=vocab, dim=p.rnn_dim), cfg
    # length-grouped batches: the project's stage-2 default, measured equal in quality and faster (README, Speed)
    cfg = FitConfig(epochs=p.epochs, batch_size=p.batch_size, lr=p.lr, warmup_ratio=p.warmup_ratio,
                    eval_every=p.eval_every, checkpoint_every=20, group_by_length=True)
    if name == "cls_projection":
        model = TransformerBiEncoder(p.backbone, "cls", "linear", max_length=p.max_length)
    elif name == "sbert":
        model = TransformerBiEncoder(p.backbone, "mean", max_length=p.max_length)
    elif name == "sllm_full":
        model = TransformerBiEncoder(p.backbone, "mean", "gelu", p.projection_dim, p.max_length)
    elif name == "sllm_lora":
        model = TransformerBiEncoder(p.backbone, "mean", "gelu", p.projection_dim, p.max_length,
                                     lora={"r": p.lora_r, "alpha": p.lora_alpha})
        cfg = dataclasses.replace(cfg, lr=p.lora_lr)
    elif name in ("cross_linear", "cross_mlp"):
        model = CrossEncoder(p.backbone, "linear" if name == "cross_linear" else "mlp", p.max_length)
    else:
        raise ValueError(f"unknown system {name!r}")
    set_precision(model, p.precision)
    return model, cfg


def run_system(params: Params, name: str, sts: pd.DataFrame, nli: pd.DataFrame, work: Path,
               log_metric=lambda key, value, step: None) -> dict:
    """Build, train (resumable from ``work/checkpoint.pt``), score; writes ``work/{predictions.parquet,
    fit_summary.json}`` and returns the metrics (plus timings and parameter counts). Raises :class:`Unavailable`."""
    p = _view(params, name)
    work.mkdir(parents=True, exist_ok=True)
    started = time.time()
    model, cfg = build(name, params, sts, nli, work)
    summary: dict = {"system": name, "runs_on": model.runs_on, "params": settings(params, name),
                     "seed": params.seed}
    if name == "infersent":
        pre = work / "nli_encoder.pt"
        if pre.exists():
            model.load_state_dict(torch.load(pre, map_location="cpu"))
            summary.update(json.loads((work / "nli_summary.json").read_text()))
        else:
            table = sample_pairs(nli[["premise", "hypothesis", "label"]], p.infersent_nli_pairs, params.seed)
            nli_cfg = FitConfig(epochs=p.infersent_nli_epochs, batch_size=64, lr=p.infersent_lr,
                                max_grad_norm=5.0, checkpoint_every=200)  # InferSent's max norm
            summary.update(pretrain_on_nli(model, table, nli_cfg, params.seed, work / "nli_checkpoint.pt",
                                           log_metric))
            atomic.write_json(work / "nli_summary.json", {k: v for k, v in summary.items() if k.startswith("nli_")})
            torch.save(model.state_dict(), pre)  # after the summary: its presence marks the pre-training done
            (work / "nli_checkpoint.pt").unlink(missing_ok=True)
    if cfg is not None:
        train, dev = study_splits(sts, p.max_train_pairs, params.seed)
        summary.update(fit(model, train, dev, cfg, params.seed, work / "checkpoint.pt", log_metric))
    train_s = time.time() - started
    scored = score_table(model, sts)
    metrics = metrics_of(scored, params)
    trainable, total = model.n_parameters()
    metrics.update(train_seconds=train_s, score_seconds=time.time() - started - train_s, trainable_parameters=trainable,
                   total_parameters=total)
    if cfg is not None:
        metrics.update(dev_start=summary["start_dev_spearman"], dev_kept=summary["kept_dev_spearman"],
                       dev_mse01=summary["kept_dev_mse"], kept_step=summary["kept_step"],
                       total_steps=summary["total_steps"])
    keep = ["task", "dataset", "subset", "file", "line", "score", "seen_in_train", "cosine", "prediction"]
    atomic.to_parquet(scored[keep], work / "predictions.parquet")
    atomic.write_json(work / "fit_summary.json", summary)
    (work / "checkpoint.pt").unlink(missing_ok=True)
    return metrics

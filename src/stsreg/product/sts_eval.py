"""STS evaluation, SentEval "all" protocol: Spearman x100 of cosine(u, v) against gold, via scipy.

Seven tasks (STS12-16, STS-B test, SICK-R test); for STS12-16 one Spearman over the concatenation of the
year's subsets. Every pair is scored once (:func:`score_pairs`), and every metric derives from that table
(:func:`task_metrics`), so bootstrap intervals and paired tests resample the very numbers reported.

    >>> spearman_cosine(model, s1, s2, gold)   # e.g. STS-B dev -> 86.72 for all-MiniLM-L6-v2
    >>> scored = score_pairs(model, sts_table) # + columns cosine, head
    >>> task_metrics(scored)["avg7_spearman"]  # 78.87 for all-MiniLM-L6-v2 at max length 256
"""

from __future__ import annotations

import dataclasses

import re

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from scipy.stats import pearsonr, spearmanr

from stsreg.infra import public_tables
from stsreg.product.bootstrap_ci import PairedResult, paired_test, spearman_ci
from stsreg.product.data.catalogue import EVAL_TASKS, dev_split, unique_sentences

#: What identifies a scored pair across prediction tables: its content, never its place in a file (a row inserted
#: above it, or a reordered file, must not pair it with another pair). Identical pairs within one task (published
#: test sets repeat some) are told apart by their occurrence number, ``occurrence``, added by :func:`keyed`.
PAIR_KEY = ["task", "sentence1", "sentence2", "score", "occurrence"]


class CoverageError(ValueError):
    """Two prediction tables do not score the same test pairs (a test table changed since one of them was made)."""


#: The number the project optimises and gates on: mean Spearman x100 of cosine over the 7 tasks (:func:`task_metrics`).
PRIMARY_METRIC = "avg7_spearman"


def cosine_scores(model, sentences1: list[str], sentences2: list[str], batch_size: int = 64,
                  show_progress: bool | None = None) -> np.ndarray:
    """(n,), (n,) sentences -> (n,) cosine similarities; each distinct sentence is encoded once."""
    return _pair_scores(model, sentences1, sentences2, batch_size, show_progress)[0]


def _pair_scores(model, sentences1, sentences2, batch_size: int, show_progress) -> tuple[np.ndarray, np.ndarray]:
    """(n,), (n,) sentences -> ((n,) cosine, (n,) served 0-5 prediction: :meth:`SiameseRegressor.predict`)."""
    unique, (i1, i2) = unique_sentences(sentences1, sentences2)
    with torch.no_grad():
        emb = model.encode(unique, batch_size=batch_size, show_progress=show_progress)
    return embedding_scores(model, emb[i1], emb[i2])


def embedding_scores(model, u: torch.Tensor, v: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """(n, d), (n, d) float32 embeddings on the CPU -> ((n,) cosine, (n,) the model's 0-5 score,
    :meth:`SiameseRegressor.predict`): the one pair scorer of the evaluation, the pyfunc and the server."""
    with torch.no_grad():
        prediction = model.predict(u.to(model.device), v.to(model.device)).float().cpu()
    return F.cosine_similarity(u, v).numpy(), prediction.numpy()


def spearman(gold, pred) -> float:
    """Spearman x100 (scipy)."""
    return float(spearmanr(np.asarray(pred, dtype=float), np.asarray(gold, dtype=float)).statistic * 100)


def spearman_cosine(model, sentences1, sentences2, gold, batch_size: int = 64,
                    show_progress: bool | None = None) -> float:
    """Spearman correlation x100 between cosine(u, v) and ``gold`` (any scale)."""
    return spearman(gold, cosine_scores(model, list(sentences1), list(sentences2), batch_size, show_progress))


def eval_pairs(sts: pd.DataFrame) -> pd.DataFrame:
    """The prepared STS table -> the pairs evaluation scores: the 7 test sets, then each declared table's test split
    (``prepare.sts_tables``), + STS-B dev, with a ``task`` column (``sts12`` ... ``sickr``, a declared table's name,
    ``stsb_dev``)."""
    public = sts[sts.dataset.isin(EVAL_TASKS) & (sts.split == "test")]
    own = sts[~sts.dataset.isin(EVAL_TASKS) & (sts.split == "test")]
    test = pd.concat([public, own]).assign(task=lambda d: d.dataset)
    dev = dev_split(sts, public_tables.DEV_TABLE).assign(task=public_tables.DEV_TASK)
    return pd.concat([test, dev], ignore_index=True)


def own_tasks(scored: pd.DataFrame) -> list[str]:
    """The declared tables scored beside the 7 public tasks, in table order."""
    return [t for t in dict.fromkeys(scored.task) if t not in EVAL_TASKS and t != public_tables.DEV_TASK]


def score_pairs(model, pairs: pd.DataFrame, batch_size: int = 64, show_progress: bool | None = None) -> pd.DataFrame:
    """Add ``cosine`` (the evaluation score, -1..1) and ``prediction`` (the served 0-5 score) to ``pairs``.

    ``pairs`` needs sentence1, sentence2; each distinct sentence is encoded once, in length-sorted batches.
    """
    cos, prediction = _pair_scores(model, pairs.sentence1.tolist(), pairs.sentence2.tolist(), batch_size, show_progress)
    return pairs.assign(cosine=cos, prediction=prediction)


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")


def task_metrics(scored: pd.DataFrame) -> dict[str, float]:
    """Scored pairs (:func:`score_pairs` over :func:`eval_pairs`) -> flat metrics, x100.

    Names: ``<task>_spearman`` (cosine, the headline), ``<task>_pearson``, ``<task>_prediction_spearman`` and
    ``<task>_prediction_mae`` (the served 0-5 score: its rank agreement and mean absolute error on the gold scale),
    ``<task>_unseen_spearman`` and ``<task>_unseen_pairs`` (pairs that no training table contains),
    ``<task>_<subset>_spearman`` per subset, ``avg7_*`` plain means over the 7 tasks, ``stsb_dev_spearman``.
    """
    out: dict[str, float] = {}
    for task in (*EVAL_TASKS, *own_tasks(scored)):  # declared tables: the same names, outside avg7
        t = scored[scored.task == task]
        if t.empty:
            raise ValueError(f"no test pairs for {task}")
        out[f"{task}_spearman"] = spearman(t.score, t.cosine)
        out[f"{task}_pearson"] = float(pearsonr(t.cosine, t.score).statistic * 100)
        out[f"{task}_prediction_spearman"] = spearman(t.score, t.prediction)
        out[f"{task}_prediction_mae"] = float(np.abs(t.prediction - t.score).mean())
        unseen = t[~t.seen_in_train]
        out[f"{task}_unseen_spearman"] = spearman(unseen.score, unseen.cosine)
        out[f"{task}_unseen_pairs"] = float(len(unseen))
        out[f"{task}_pairs"] = float(len(t))
        if task in EVAL_TASKS and public_tables.BY_NAME[task].by_subset and t.subset.nunique() > 1:
            for subset, s in t.groupby("subset", sort=True):
                out[f"{task}_{_slug(subset)}_spearman"] = spearman(s.score, s.cosine)
    for kind in ("spearman", "pearson", "prediction_spearman", "prediction_mae", "unseen_spearman"):
        out[f"avg7_{kind}"] = float(np.mean([out[f"{t}_{kind}"] for t in EVAL_TASKS]))
    dev = scored[scored.task == public_tables.DEV_TASK]
    if not dev.empty:
        out[public_tables.DEV_METRIC] = spearman(dev.score, dev.cosine)
    return out


def intervals(scored: pd.DataFrame, n_resamples: int = 1000, seed: int = 0, confidence: float = 0.95) -> dict[str,
                                                                                                              float]:
    """Bootstrap intervals (resampling pairs) of every task's cosine Spearman and of avg7, both views.

    Names: ``<task>_spearman_low`` / ``_high``, ``<task>_unseen_spearman_low`` / ``_high``, ``avg7_...`` likewise.
    """
    out: dict[str, float] = {}
    for view, rows in (("spearman", scored), ("unseen_spearman", scored[~scored.seen_in_train])):
        tasks = {t: (g.score.to_numpy(), g.cosine.to_numpy()) for t, g in rows.groupby("task")
                 if t != public_tables.DEV_TASK}
        for task, arrays in list(tasks.items()) + [("avg7", None)]:
            # avg7: the 7 public tasks only, in groupby order (the resampling's order, so its numbers stay put)
            data = [a for t, a in tasks.items() if t in EVAL_TASKS] if arrays is None else [arrays]
            out[f"{task}_{view}_low"], out[f"{task}_{view}_high"] = spearman_ci(data, n_resamples, seed, confidence)
    return out



def keyed(predictions: pd.DataFrame, tasks: tuple[str, ...] = EVAL_TASKS) -> pd.DataFrame:
    """The test pairs of a prediction table with :data:`PAIR_KEY` (the occurrence of each identical pair added).
    A table without the pairs' text (written before pairs were matched by content) raises :class:`CoverageError`."""
    absent = [c for c in PAIR_KEY[:-1] if c not in predictions.columns]
    if absent:
        raise CoverageError(f"the prediction table has no {absent} column(s): it predates matching pairs by content")
    test = predictions[predictions.task.isin(tasks)]
    return test.assign(occurrence=test.groupby(PAIR_KEY[:-1], sort=False).cumcount())


def uncovered(a: pd.DataFrame, b: pd.DataFrame, tasks: tuple[str, ...] = EVAL_TASKS) -> pd.DataFrame:
    """The test pairs of prediction table ``a`` (of ``tasks``) with no twin in ``b`` (matched as
    :func:`paired_on_predictions` matches them), as rows of ``a`` without ``occurrence``: what ``b``'s model must
    still score. Raises :class:`CoverageError` when a table cannot be matched by content."""
    a, b = keyed(a, tasks), keyed(b, tasks)
    hit = a.merge(b[PAIR_KEY].assign(_hit=True), on=PAIR_KEY, how="left", validate="1:1")["_hit"].notna()
    return a[~hit.to_numpy()].drop(columns="occurrence").reset_index(drop=True)


def paired_on_predictions(a: pd.DataFrame, b: pd.DataFrame, unseen_only: bool = False, n_resamples: int = 1000,
                          seed: int = 0, tasks: tuple[str, ...] = EVAL_TASKS) -> PairedResult:
    """Paired bootstrap of avg7 (cosine Spearman), ``a`` minus ``b``: two prediction tables (``predictions.parquet``
    of the evaluation) over the same test pairs, matched by content (:data:`PAIR_KEY`); ``unseen_only`` keeps the
    unseen pairs; ``tasks``: the tasks averaged (default the 7 public ones: avg7; one declared table: its own test).
    Raises :class:`CoverageError` when a test pair of ``a`` has no twin in ``b``: comparing different pairs would
    report a gain that is not one."""
    a, b = keyed(a, tasks), keyed(b, tasks)
    on = a.merge(b[PAIR_KEY + ["cosine"]], on=PAIR_KEY, suffixes=("", "_b"), how="left", validate="1:1")
    missing = on.cosine_b.isna()
    if missing.any():
        per_task = on[missing].task.value_counts().sort_index().to_dict()
        raise CoverageError(f"{int(missing.sum())} of {len(on)} test pairs have no prediction in the other table "
                            f"(per task: {per_task}): the test tables changed since it was scored")
    if unseen_only:
        on = on[~on.seen_in_train]
    arrays = [(t.score.to_numpy(), t.cosine.to_numpy(), t.cosine_b.to_numpy()) for _, t in on.groupby("task")]
    if len(arrays) != len(tasks):
        raise CoverageError(f"the prediction tables hold pairs of only {len(arrays)} of the tasks {list(tasks)}")
    return dataclasses.replace(paired_test(arrays, n_resamples, seed), pairs=len(on))


def format_table(metrics: dict[str, float]) -> str:
    """Markdown: the 7 tasks + avg7 in both views with intervals, Pearson, and the served score's Spearman / MAE."""
    names = {name: public_tables.display(name) for name in (*public_tables.AVG7, "avg7")}

    def ci(key: str) -> str:
        return f" [{metrics[key + '_low']:.2f}, {metrics[key + '_high']:.2f}]" if key + "_low" in metrics else ""

    lines = ["| task | Spearman (95% CI) | unseen Spearman (95% CI) | unseen pairs | Pearson | served score Spearman | "
             "served score MAE |", "|---|---:|---:|---:|---:|---:|---:|"]
    own = [k.removesuffix("_pairs") for k in metrics
           if k.endswith("_pairs") and not k.endswith("_unseen_pairs") and k.removesuffix("_pairs") not in names]
    for task, label in [*names.items(), *((t, f"{t} (yours)") for t in own)]:
        pairs = f"{metrics[task + '_unseen_pairs']:.0f}/{metrics[task + '_pairs']:.0f}" if task != "avg7" else ""
        lines.append(f"| {label} | {metrics[task + '_spearman']:.2f}{ci(task + '_spearman')} | "
                     f"{metrics[task + '_unseen_spearman']:.2f}{ci(task + '_unseen_spearman')} | {pairs} | "
                     f"{metrics[task + '_pearson']:.2f} | {metrics[task + '_prediction_spearman']:.2f} | "
                     f"{metrics[task + '_prediction_mae']:.2f} |")
    if public_tables.DEV_METRIC in metrics:
        lines += ["", f"{public_tables.display(public_tables.DEV_TABLE)} dev Spearman (model selection): "
                      f"{metrics[public_tables.DEV_METRIC]:.2f}"]
    return "\n".join(lines)

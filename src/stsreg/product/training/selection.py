"""Stage 2's model selection: STS-B dev Spearman at each evaluation, and the checkpoints it keeps.

Two selections are tracked on every run, one of them saved (``keep``):

- ``best``: the best evaluation *including step 0*, so production never hands on a model worse than its start;
- ``trained``: the best evaluation *after* step 0 (the authors' selection: the best score is reset before stage 2),
  i.e. what the method trained; the comparison's rows use it.
"""

from __future__ import annotations

import math
from pathlib import Path

from stsreg.infra import atomic
from stsreg.infra.errors import InputError
from stsreg.product.sts_eval import spearman_cosine

KEEPS = ("best", "trained")


def _rank(score: float) -> float:
    """Dev Spearman for comparisons: a collapsed model (constant cosines) has none (nan) and ranks last."""
    return -math.inf if math.isnan(score) else score




class DevSelector:
    """Scores ``model`` on ``dev`` (sentence1, sentence2, score 0-5: STS-B dev) and saves the ``keep`` selection.

    ``dirs`` maps ``best`` / ``trained`` to the folders each selection is saved to. ``on_eval(step, dev_spearman)``
    is called after each evaluation (the search's pruner raises from it to stop a trial). Its ``state`` (both
    selections and the dev curve, JSON-like) is a checkpoint's object: :meth:`state_dict` / :meth:`load_state_dict`."""

    def __init__(self, model, dev, batch_size: int, keep: str, dirs: dict[str, Path],
                 log_metric=lambda key, value, step: None, on_eval=None):
        if keep not in KEEPS:
            raise ValueError(f"keep must be one of {KEEPS}, got {keep!r}")
        self.model, self.dev, self.batch_size, self.keep = model, dev, batch_size, keep
        self.dirs, self.log_metric, self.on_eval = dirs, log_metric, on_eval
        self.state = {"best": -math.inf, "best_step": -1, "trained_best": -math.inf, "trained_best_step": -1,
                      "curve": []}

    def state_dict(self) -> dict:
        return self.state

    def load_state_dict(self, saved: dict) -> None:
        self.state = dict(saved)

    def __call__(self, step: int) -> float:
        """Evaluate at ``step``; returns the dev Spearman (x100 of cosine)."""
        d, s = self.dev, self.state
        score = spearman_cosine(self.model, d.sentence1, d.sentence2, d.score, self.batch_size, show_progress=False)
        s["curve"].append([step, score])
        self.log_metric("dev_spearman", score, step)
        if self.on_eval is not None:
            self.on_eval(step, score)
        if math.isnan(score):  # a collapsed model or NaN labels: never a candidate, whatever came before
            return score
        if _rank(score) > _rank(s["best"]) or s["best_step"] < 0:
            s["best"], s["best_step"] = score, step
            self._save("best")
        # step 0 is the starting point, not something trained; the first evaluation after it is always a candidate
        if step > 0 and (_rank(score) > _rank(s["trained_best"]) or s["trained_best_step"] < 0):
            s["trained_best"], s["trained_best_step"] = score, step
            self._save("trained")
        return score

    def _save(self, selection: str) -> None:
        if selection == self.keep:
            with atomic.staged_dir(self.dirs[selection]) as staged:  # a reader never sees a half-saved model
                self.model.save(staged)

    @property
    def kept_dir(self) -> Path:
        """The folder of the kept selection; :class:`InputError` when no evaluation gave a dev score (all NaN)."""
        step = self.state["best_step" if self.keep == "best" else "trained_best_step"]
        if step < 0:
            raise InputError(f"no model kept: every dev evaluation was NaN ({len(self.state['curve'])} evaluations; "
                             "constant predictions or NaN dev scores), so there is nothing to select")
        return self.dirs[self.keep]

    def summary(self) -> dict:
        s = self.state
        return {"start_dev_spearman": s["curve"][0][1] if s["curve"] else None, "best_dev_spearman": s["best"],
                "best_step": s["best_step"], "trained_best_dev_spearman": s["trained_best"],
                "trained_best_step": s["trained_best_step"], "kept": self.keep, "dev_curve": s["curve"]}

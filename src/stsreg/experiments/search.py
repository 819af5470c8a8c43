"""Stage-2 hyperparameter search on STS-B dev only (Optuna).

Each trial fine-tunes ``models/stage1`` with a sampled stage-2 configuration (objective, lr, epochs, x0, k,
label handling, joint lambda, warm-up, length grouping; ranges in ``params.search``) on STS-B train + SICK-R train
and is scored by the best STS-B dev Spearman *after* step 0 (what the trial trained). The other stage-2 settings
(batch, optimizer, clipping, cosine map) come from ``params.stage2``. Test rows are never read
(:func:`stsreg.product.runners.stage2_runner.stage2_data`), so no test figure can influence a choice.

The study lives in a SQLite file (``reports/search/study.db``) named by what it searches on (space, fixed
settings, data, starting model, code): a rerun with the same inputs continues it, a killed trial is retried and
resumes from its last stage-2 checkpoint (the trial folder is keyed by its configuration). A median pruner stops a
trial whose dev curve falls below the median of earlier trials at the same step.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd

from stsreg.infra import atomic
from stsreg.infra.config import Params, SearchParams, Stage2Params
from stsreg.infra.errors import ParamsError
from stsreg.infra.loss_specs import LOSSES, searched_knobs

#: Searched fields in the order the report shows them: the optimisation's, then the loss knobs some declared loss lets
#: the search vary (:func:`stsreg.infra.loss_specs.searched_knobs`: x0, k, joint_lambda).
SEARCHED = ("loss", "epochs", "lr", "warmup_ratio", "labels", "group_by_length", *searched_knobs())
#: The ``[low, high]`` ranges of ``params.search``.
RANGES = ("lr", "warmup_ratio", *searched_knobs())
#: ``params.stage2`` fields every trial takes as they are (the search never changes them; a trial sets its own
#: ``eval_every`` and keeps the best dev evaluation after step 0; every trial starts from stage 1, so ``warm_start``,
#: the loop's retrain, is not read).
FIXED = tuple(f.name for f in dataclasses.fields(Stage2Params)
              if f.name not in (*SEARCHED, "eval_every", "keep", "warm_start"))


def check_ranges(s: SearchParams, source: str = "params.yaml") -> None:
    """Every range is ``[low, high]`` with low <= high; raises :class:`ParamsError` listing the bad ones."""
    bad = [f"{source}: search.{name}: expected [low, high] with low <= high, got {list(getattr(s, name))}"
           for name in RANGES if len(getattr(s, name)) != 2 or getattr(s, name)[0] > getattr(s, name)[1]]
    bad += [f"{source}: search.{name}: needs at least one choice"
            for name in ("losses", "epochs", "labels", "group_by_length")
            if not getattr(s, name)]
    if bad:
        raise ParamsError("\n".join(bad))


def uses(loss: str) -> set[str]:
    """The loss knobs the search varies for ``loss`` (:meth:`stsreg.infra.loss_specs.LossSpec.varies`): x0 (buffered
    losses), k (Smooth K2), joint_lambda (joint and CoSENT-plus losses)."""
    return set(LOSSES[loss].varies())


def suggest(trial, s: SearchParams, base: Stage2Params) -> Stage2Params:
    """One trial's stage-2 settings: ``base`` with the searched fields sampled (loss-specific ones only where the
    sampled loss reads them), dev evaluated every ``s.eval_every`` steps, the best after step 0 kept."""
    loss = trial.suggest_categorical("loss", list(s.losses))
    kw = {"loss": loss,
          "epochs": trial.suggest_categorical("epochs", list(s.epochs)),
          "lr": trial.suggest_float("lr", *s.lr, log=True),
          "warmup_ratio": trial.suggest_float("warmup_ratio", *s.warmup_ratio),
          "labels": trial.suggest_categorical("labels", list(s.labels)),
          "group_by_length": trial.suggest_categorical("group_by_length", list(s.group_by_length))}
    for name in sorted(uses(loss)):
        kw[name] = trial.suggest_float(name, *getattr(s, name))
    return dataclasses.replace(base, **kw, eval_every=s.eval_every, keep="trained")


def point_params(point) -> dict:
    """A :class:`~stsreg.infra.config.SearchPoint` as the trial params Optuna would record for it."""
    d = dataclasses.asdict(point)
    return {k: d[k] for k in ("loss", "epochs", "lr", "warmup_ratio", "labels", "group_by_length")} | \
        {k: d[k] for k in sorted(uses(point.loss))}


def study_name(params: Params, data_sha: str, init_sha: str, code: str) -> str:
    """Names the study by everything a trial's score depends on except the sampled values; the budget
    (``trials``, ``minutes``) and the points to try first (``enqueue``) are left out, so raising the budget or
    adding a point continues the same study."""
    space = {k: v for k, v in dataclasses.asdict(params.search).items() if k not in ("trials", "minutes", "enqueue")}
    parts = {"search": space, "fixed": {f: getattr(params.stage2, f) for f in FIXED},
             "model": dataclasses.asdict(params.model), "seed": params.seed, "data": data_sha, "init": init_sha,
             "code": code}
    return "stage2-" + hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:12]


def trial_key(p: Stage2Params) -> str:
    """The folder name of a configuration's checkpoints: a retried trial with the same settings resumes there."""
    return hashlib.sha256(json.dumps(dataclasses.asdict(p), sort_keys=True).encode()).hexdigest()[:12]


def trials_table(study) -> pd.DataFrame:
    """One row per trial: number, state, dev (best after step 0), its step, minutes, and the searched values."""
    rows = []
    for t in study.trials:
        row = {"trial": t.number, "state": t.state.name, "dev_spearman": t.value,
               "best_step": t.user_attrs.get("best_step"), "minutes": t.user_attrs.get("minutes"),
               "last_step": max(t.intermediate_values) if t.intermediate_values else None}
        row.update({k: t.params.get(k) for k in SEARCHED})
        rows.append(row)
    return pd.DataFrame(rows, columns=["trial", "state", "dev_spearman", "best_step", "last_step", "minutes",
                                       *SEARCHED])


def format_report(table: pd.DataFrame, best: dict | None, start_dev: float | None) -> str:
    """Markdown: the best configuration (as ``params.yaml`` stage-2 values) and every trial, best first."""
    lines = ["Stage-2 search on STS-B dev only (best Spearman x100 after step 0; test rows are never read).", ""]
    if start_dev is not None:
        lines += [f"Starting point (models/stage1, step 0): STS-B dev {start_dev:.2f}.", ""]
    if best:
        lines += [f"**Best: trial {best['trial']}, dev {best['dev_spearman']:.2f}** -> stage-2 settings: "
                  + ", ".join(f"`{k}={v}`" for k, v in best["stage2"].items()), ""]
    head = ["trial", "state", "dev", "@ step", "min", *SEARCHED]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    order = table.assign(_v=table.dev_spearman.fillna(-np.inf)).sort_values("_v", ascending=False)
    for _, r in order.iterrows():
        def cell(v, fmt="{}"):
            return "" if v is None or (isinstance(v, float) and np.isnan(v)) else fmt.format(v)
        cells = [str(r.trial), r.state, cell(r.dev_spearman, "{:.2f}"), cell(r.best_step, "{:.0f}"),
                 cell(r.minutes, "{:.1f}"), r.loss, cell(r.epochs, "{:.0f}"), cell(r.lr, "{:.2e}"),
                 cell(r.warmup_ratio, "{:.2f}"), cell(r.labels), cell(r.group_by_length)]
        cells += [cell(r[name], knob.fmt) for name, knob in searched_knobs().items()]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines)


def plot(study, path: Path, start_dev: float | None) -> None:
    """Left: the dev curve of every trial (pruned ones end early). Right: each trial's best dev, by trial number."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    for t in study.trials:
        if t.intermediate_values:
            steps = sorted(t.intermediate_values)
            ax1.plot(steps, [t.intermediate_values[s] for s in steps], marker=".",
                     label=f"#{t.number} {t.params.get('loss', '')} ({t.state.name.lower()})")
    if start_dev is not None:
        ax1.axhline(start_dev, color="grey", ls="--", lw=1, label="start (step 0)")
    ax1.set_xlabel("optimizer step")
    ax1.set_ylabel("STS-B dev Spearman x100")
    ax1.set_title("dev curve per trial")
    ax1.legend(fontsize=7)
    done = [t for t in study.trials if t.value is not None]
    ax2.bar([t.number for t in done], [t.value for t in done],
            color=["tab:green" if t.state.name == "COMPLETE" else "tab:grey" for t in done])
    if done:
        lo = min(t.value for t in done)
        ax2.set_ylim(max(0.0, min(lo, start_dev or lo) - 1), None)
    if start_dev is not None:
        ax2.axhline(start_dev, color="grey", ls="--", lw=1)
    ax2.set_xlabel("trial")
    ax2.set_ylabel("best dev after step 0")
    ax2.set_title("dev Spearman per trial (grey: pruned)")
    fig.tight_layout()
    atomic.savefig(fig, path, dpi=120)
    plt.close(fig)

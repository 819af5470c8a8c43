"""MLflow model registry: log a trained model as a pyfunc, register it as ``challenger``, gate its promotion.

Registered model ``sts-regression``; aliases ``challenger`` (the newest registered version) and ``champion``
(the served one). A version carries tags: data hashes, params hash, avg7, git commit, and after the gate
``promotion.decision`` / ``promotion.reason``. Its run holds ``eval/predictions.parquet`` (every test pair's
cosine), which the gate needs to test the challenger against the champion on the same pairs.
"""

from __future__ import annotations

import json
import logging
import re
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Callable, Iterator

import pandas as pd

from stsreg.infra import tracking
from stsreg.infra.quiet import quiet
from stsreg.infra.config import PromoteParams
from stsreg.infra.errors import InputError
from stsreg.product.data.catalogue import EVAL_TASKS
from stsreg.product.gate_verdict import verdict
from stsreg.product.model_files import WEIGHTS_TAG, weights_digest
from stsreg.product.sts_eval import CoverageError, paired_on_predictions, uncovered
import stsreg

log = logging.getLogger(__name__)

MODEL_NAME = "sts-regression"
#: Where the version's card (its registry description) gives the gate's verdict.
GATE_HEADING = "## The promotion gate"
PREDICTIONS = "eval/predictions.parquet"


def _requirements() -> list[str]:
    """Pins of the serving stack. torch without its local ``+cpu`` tag (pip resolves it; CUDA builds also fit)."""
    return [f"{p}=={version(p).split('+')[0]}" for p in
            ("torch", "transformers", "tokenizers", "safetensors", "pandas", "numpy", "scipy", "mlflow", "tqdm")]


#: MLflow keeps a version's description in a VARCHAR(5000) on PostgreSQL and MySQL; SQLite does not enforce it, so a
#: card that registered on the embedded store was refused by a team's server (StringDataRightTruncation)
DESCRIPTION_LIMIT = 5000
CARD_POINTER = "*The whole card: README.md in this version's model folder (artifact `model/README.md`).*"


def fitted(card: str, gate: str = "") -> str:
    """A version's description within :data:`DESCRIPTION_LIMIT` characters: ``card`` then ``gate`` (the verdict
    section, kept whole); where both do not fit, the card keeps the leading sections (``## ...``) that do, followed by
    :data:`CARD_POINTER` (the whole card is always the model folder's README.md). A card read back from a version
    (already cut: it holds the pointer) keeps its pointer."""
    tail = f"\n\n{gate}" if gate else ""
    cut = CARD_POINTER in card
    card = card.replace(CARD_POINTER, "").rstrip()
    if not cut and len(card) + len(tail) <= DESCRIPTION_LIMIT:
        return card + tail
    tail = tail[:DESCRIPTION_LIMIT // 2]
    room = DESCRIPTION_LIMIT - len(tail) - len(CARD_POINTER) - 2
    kept = ""
    for section in re.split(r"(?=\n## )", card):
        if len(kept) + len(section) > room:
            break
        kept += section
    return (kept or card[:room]).rstrip() + "\n\n" + CARD_POINTER + tail


def _add_card(saved: Path, card: str) -> None:
    """The model card as README.md at the pyfunc's root and beside its weights (the sentence-transformers folder)."""
    for folder in [saved, *(p.parent for p in (saved / "artifacts").glob("*/modules.json"))]:
        (folder / "README.md").write_text(card, encoding="utf-8")


def _registered_already(c, name: str, run_id: str):
    """`stsreg register` typed again on the same evaluation: its version (alias challenger set on it again), not a
    second copy, nor MLflow's "Path already exists"; None when the run holds no version yet."""
    done = c.search_model_versions(f"name = '{name}' and run_id = '{run_id}'")
    if not done:
        return None
    mv = max(done, key=lambda v: int(v.version))
    c.set_registered_model_alias(name, "challenger", mv.version)
    log.info("evaluation run %s is registered already as %s version %s: alias challenger set on it", run_id, name,
             mv.version)
    return mv


@dataclass(frozen=True)
class VersionFiles:
    """What a registered version holds: the model ``folder`` (register's package), its test ``predictions`` (what the
    gate judges), the model ``card`` (:mod:`stsreg.product.model_card`: README.md of the logged model and the version's
    description), and in the pyfunc's model config the ``scale`` [lo, hi] its served ``score`` is given on
    (``serve.scale``) and the ``backend`` that runs its encoder (``serve.backend``)."""

    folder: Path
    predictions: Path
    card: str | None = None
    scale: tuple[float, float] = (0.0, 5.0)
    backend: str = "auto"


def log_and_register(run_id: str, files: VersionFiles, tags: dict[str, str], name: str = MODEL_NAME,
                     uri: str | None = None):
    """Log ``files.folder`` as a pyfunc in run ``run_id`` with its predictions; register a version, alias
    ``challenger``.

    Everything goes through an explicit client of ``uri`` (default :func:`stsreg.infra.tracking.tracking_uri`). The
    pyfunc becomes the run's ``model`` artifact: saved straight into a local artifact store (the weights are copied
    once), or saved to a temporary folder and uploaded to a remote one. The version's source is
    ``runs:/<run_id>/model``. Returns the :class:`mlflow.entities.model_registry.ModelVersion`.
    """
    import mlflow


    with quiet(warnings=("Add type hints to the `predict` method",)):  # MLflow's advice, raised as the class is made
        from stsreg.product.pyfunc_model import EXAMPLE, SIGNATURE, SentencePairModel

    from mlflow.store.artifact.artifact_repository_registry import get_artifact_repository
    from mlflow.store.artifact.local_artifact_repo import LocalArtifactRepository

    c = tracking.client(uri)
    mv = _registered_already(c, name, run_id)
    if mv is not None:
        return mv

    model_dir, card = files.folder, files.card

    def save(path: Path) -> None:
        with quiet(logs={"mlflow.pyfunc": ("Passing a Python object as `python_model`",)}):  # the pickle notice
            mlflow.pyfunc.save_model(str(path), python_model=SentencePairModel(), artifacts={"model": str(model_dir)},
                                     # MLFLOW_PYFUNC_INFERENCE_CONFIG may override them
                                     model_config={"precision": "auto", "scale": list(files.scale),
                                                   "backend": files.backend},
                                     signature=SIGNATURE, pip_requirements=_requirements(), input_example=EXAMPLE,
                                     code_paths=[str(Path(stsreg.__file__).parent)])
        if card:
            _add_card(path, card)

    store = get_artifact_repository(c.get_run(run_id).info.artifact_uri)
    # the embedded store: write the pyfunc in place, copying the weights once
    if isinstance(store, LocalArtifactRepository):
        save(Path(store.artifact_dir) / "model")
    else:  # a remote store (a tracking server): save beside, then upload
        with tempfile.TemporaryDirectory() as tmp:
            save(Path(tmp) / "model")
            c.log_artifacts(run_id, str(Path(tmp) / "model"), artifact_path="model")
    c.log_artifact(run_id, str(files.predictions), artifact_path=Path(PREDICTIONS).parent.as_posix())
    from mlflow.exceptions import MlflowException

    try:
        c.create_registered_model(name, description="Siamese STS model: cosine of embeddings + regression head score")
    except MlflowException as exc:
        if exc.error_code != "RESOURCE_ALREADY_EXISTS":
            raise
    # what a champion pin names (stsreg.product.champion_pin): read from the tags, the weights need no download
    tags = {**tags, WEIGHTS_TAG: weights_digest(model_dir),
            "backbone": json.loads((Path(model_dir) / "stsreg_model.json").read_text())["backbone"]}
    mv = c.create_model_version(name, source=f"runs:/{run_id}/model", run_id=run_id, tags=tags,
                                description=fitted(card.split("---", 2)[-1].strip()) if card else None)
    c.set_registered_model_alias(name, "challenger", mv.version)
    log.info("registered %s version %s as challenger", name, mv.version)
    return mv


def model_folder(version, uri: str | None, dst: str | Path) -> Path:
    """The saved model folder (weights, tokenizer, sentence-transformers files) of registered ``version``, downloaded
    from store ``uri`` (None: :func:`stsreg.infra.tracking.tracking_uri`, the project's store) into ``dst``; the pyfunc
    keeps it under ``artifacts/`` (nothing is loaded). The download goes through a client of that store, never
    MLflow's process-wide default."""
    Path(dst).mkdir(parents=True, exist_ok=True)
    local = Path(tracking.client(uri).download_artifacts(version.run_id, "model", str(dst)))
    (folder,) = [p.parent for p in (local / "artifacts").glob("*/config.json")]
    return folder


def version_by_alias(c, name: str, alias: str):
    """The model version behind ``alias``, or None when the model or the alias does not exist (a registry that does
    not answer raises: it is not "no alias")."""
    from mlflow.exceptions import MlflowException

    try:
        return c.get_model_version_by_alias(name, alias)
    except MlflowException as exc:
        if exc.error_code in ("RESOURCE_DOES_NOT_EXIST", "INVALID_PARAMETER_VALUE"):
            return None
        raise


def _predictions(c, mv) -> pd.DataFrame:
    with tempfile.TemporaryDirectory() as tmp:
        return pd.read_parquet(c.download_artifacts(mv.run_id, PREDICTIONS, tmp))


def _judge_rescored(judge, mine: pd.DataFrame, stored: pd.DataFrame, champion, rescore, tasks: tuple[str, ...]):
    """The gate's tests against the champion where its stored predictions miss some of today's test pairs: only the
    pairs it lacks are scored (``rescore(champion, pairs)``) and joined to the stored ones, which a grown table makes
    the common case; where the stored table cannot be paired at all (an old format), or the join still misses pairs,
    the champion is scored on every test pair (``rescore(champion, None)``). Returns (tests, what was scored)."""
    try:
        lacking = uncovered(mine, stored, tasks)
        return judge(pd.concat([stored, rescore(champion, lacking)], ignore_index=True)), \
            f"the {len(lacking)} pairs its stored predictions lacked scored"
    except CoverageError:
        return judge(rescore(champion, None)), "every test pair scored"


def _record(c, name: str, version: str, out: dict) -> None:
    """The gate's decision on the version: tags ``promotion.decision`` / ``promotion.reason``, and its card in the
    registry (the description) ends with the verdict, each guard and whether it held (replaced when judged again)."""
    c.set_model_version_tag(name, version, "promotion.decision", "promoted" if out["promoted"] else "kept champion")
    c.set_model_version_tag(name, version, "promotion.reason", out["reason"])
    card = (c.get_model_version(name, version).description or "").split(GATE_HEADING)[0].rstrip()
    c.update_model_version(name, version, description=fitted(card, f"{GATE_HEADING}\n\n"
                           f"{'Promoted' if out['promoted'] else 'Not promoted'}: {out['reason']}.\n"))


#: Prefect's global concurrency limit (of 1) that orders promotions across hosts sharing a Prefect server.
PROMOTION_LIMIT = "stsreg-promotion"


@contextmanager
def promotion_lock(timeout_s: float = 900) -> Iterator[None]:
    """One promotion at a time across every host of a team: the read of the champion, the gate and the alias move
    happen inside a slot of Prefect's global concurrency limit :data:`PROMOTION_LIMIT` (made here with limit 1 when
    missing; a holder that dies frees it when its lease ends). Without a Prefect server (``PREFECT_API_URL`` unset)
    only this project writes its registry, and the pipeline lock its stages hold already orders them."""
    from prefect.settings import PREFECT_API_URL

    if not PREFECT_API_URL.value():
        yield
        return
    from prefect.client.orchestration import get_client
    from prefect.concurrency.sync import concurrency

    with get_client(sync_client=True) as client:
        client.upsert_global_concurrency_limit_by_name(PROMOTION_LIMIT, 1)
    with concurrency(PROMOTION_LIMIT, occupy=1, timeout_seconds=timeout_s, strict=True):
        yield


@dataclass(frozen=True)
class Fallbacks:
    """Where the gate gets predictions no version has stored: ``baseline()`` (the predictions table of the untouched
    backbone, named ``baseline_name``) for a first challenger; ``rescore(champion_version, pairs)`` for a champion
    whose stored predictions miss today's test pairs. None: that case is decided without them (see :func:`promote`)."""

    baseline: Callable[[], pd.DataFrame] | None = None
    baseline_name: str = "the untouched backbone"
    rescore: Callable | None = None


def promote(gate: PromoteParams, n_resamples: int = 1000, seed: int = 0, name: str = MODEL_NAME,
            uri: str | None = None, version: int | None = None, fallbacks: Fallbacks = Fallbacks()) -> dict:
    """Move ``champion`` to ``challenger`` if every objective of ``gate.metrics`` gains >= margin *and* the gain is
    significant, and every guard of ``gate.guards`` holds (the guarded metric's lower bound >= -its bound).

    With no champion yet, the challenger faces ``fallbacks.baseline()`` instead (the predictions table of the
    untouched backbone, computed only then), so the first champion is never worse than the model the user
    downloaded; without a baseline the first version is promoted. Pairs are matched by content; where the champion's
    stored predictions do not cover today's test pairs (a test table changed), ``fallbacks.rescore(champion_version,
    pairs)`` scores the champion on the pairs it lacks (``pairs``; None: every test pair of today's tables) first
    (without a rescore the gate refuses). Records the decision as tags on the challenger version and returns
    ``{"promoted", "reason", "challenger", "champion", ...test}``. Never touches ``champion`` on failure (any exception
    leaves the aliases as they were).

    ``version``: the version this run registered (what its register stage wrote), judged whatever the
    ``challenger`` alias says by now (another host's retrain may have registered since); None: the alias. The champion
    is read, judged against and moved inside :func:`promotion_lock`, so two retrains racing to
    promote are judged one after the other, the second against the first's outcome.
    """
    c = tracking.client(uri)
    baseline, rescore = fallbacks.baseline, fallbacks.rescore
    challenger = c.get_model_version(name, str(version)) if version is not None else \
        version_by_alias(c, name, "challenger")
    if challenger is None:
        raise InputError(f"registered model {name!r} has no 'challenger' version; run `stsreg register` first")
    with promotion_lock():  # the champion read, judged against and moved by one promotion at a time
        champion = version_by_alias(c, name, "champion")
        out = {"challenger": int(challenger.version), "champion": int(champion.version) if champion else None}
        if champion is None and baseline is None:
            out.update(promoted=True, reason="no champion yet: the first registered version is promoted")
        elif champion is not None and champion.version == challenger.version:
            out.update(promoted=False, reason=f"version {challenger.version} is already the champion")
        else:
            other, against, kept = ((baseline(), f"{fallbacks.baseline_name} (no champion yet)", "no champion yet")
                                    if champion is None else
                                    (_predictions(c, champion), f"champion v{champion.version}", "kept the champion"))
            mine = _predictions(c, challenger)
            criteria = {crit: (EVAL_TASKS if crit == "avg7" else (crit,)) for crit in (*gate.metrics, *gate.guards)}

            def judge(theirs: pd.DataFrame) -> dict[str, dict]:
                return {crit: paired_on_predictions(mine, theirs, gate.unseen_only, n_resamples, seed,
                                                    tasks).as_dict() for crit, tasks in criteria.items()}

            try:
                tests = judge(other)
            except CoverageError as exc:
                if champion is None or rescore is None:
                    raise InputError(f"cannot compare the challenger with {against}: {exc}") from exc
                tests, how = _judge_rescored(judge, mine, other, champion, rescore,
                                             tuple(dict.fromkeys(t for ts in criteria.values() for t in ts)))
                log.info("champion v%s's stored predictions do not cover today's test pairs (%s): %s",
                         champion.version, exc, how)
                against += f", re-scored on today's test tables ({how})"
            passed, reason, guards = verdict(gate, tests, against, kept)
            first = tests[gate.metrics[0]]
            out.update(promoted=passed, reason=reason, test=first, tests=tests,
                       **({"guards": guards} if guards else {}))
        if out["promoted"]:
            c.set_registered_model_alias(name, "champion", challenger.version)
        _record(c, name, challenger.version, out)
        log.info("promotion: %s", out["reason"])
        return out



"""What a model URI names, looked up in the project's registry (never MLflow's process-wide default, ``./mlflow.db``):
``models:/name@alias`` (resolved now, and followed while served), ``models:/name/N`` (pinned), or a run / folder
(MLflow resolves it). Shared by ``stsreg serve`` (:mod:`stsreg.product.serving.serve`), the alias follower
(:mod:`stsreg.product.serving.served`) and batch encoding."""

from __future__ import annotations

import re
import urllib.request
from pathlib import Path

from stsreg.infra.errors import InputError
from stsreg.infra import tracking


def answers(uri: str, timeout: float = 5.0) -> bool:
    """Whether the MLflow tracking server at ``uri`` (http[s]) answers its health check within ``timeout`` s."""
    try:
        with urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=timeout) as r:  # noqa: S310 (the user's URL)
            return r.status == 200
    except (OSError, ValueError):
        return False


#: A registered model named by alias (``models:/sts-regression@champion``): resolved here, followed when served.
ALIAS_URI = re.compile(r"models:/(?P<name>[^/@]+)@(?P<alias>[^/@]+)")


def alias_version(model_uri: str, tracking_uri: str):
    """The registered version behind ``models:/name@alias`` in ``tracking_uri``'s registry (None for any other URI, or
    no such alias)."""
    from stsreg.product import registry

    match = ALIAS_URI.fullmatch(model_uri)
    if not match:
        return None
    return registry.version_by_alias(tracking.client(tracking_uri), match["name"], match["alias"])


#: A registered version named by number (``models:/sts-regression/3``): pinned, never followed.
PINNED_URI = re.compile(r"models:/(?P<name>[^/@]+)/(?P<version>[0-9]+)")


def served_version(model_uri: str, tracking_uri: str) -> str | None:
    """The registered version number ``model_uri`` serves now: an alias's current version, a pinned number, or None
    (a run or a folder)."""
    pinned = PINNED_URI.fullmatch(model_uri)
    if pinned:
        return pinned["version"]
    version = alias_version(model_uri, tracking_uri)
    return str(version.version) if version else None


def resolve(model_uri: str, tracking_uri: str) -> str:
    """The artifact URI behind ``model_uri``, looked up in ``tracking_uri``'s registry (not MLflow's process-wide
    default, which is ``./mlflow.db``). Raises :class:`~stsreg.infra.errors.InputError` in one line when the store does
    not answer or no version has the alias: serving never starts on a guess."""
    import mlflow.exceptions


    if tracking_uri.startswith(("http://", "https://")) and not answers(tracking_uri):
        raise InputError(f"the MLflow tracking server {tracking_uri} does not answer: start it (`make servers`) or "
                         "unset MLFLOW_TRACKING_URI to use the project's embedded store")
    if tracking_uri.startswith("sqlite:///") and not Path(tracking_uri.removeprefix("sqlite:///")).is_file():
        raise InputError(f"no MLflow store at {tracking_uri} (run from the project folder, after `make run`)")
    pinned = PINNED_URI.fullmatch(model_uri)
    if pinned:  # looked up here too: MLflow would ask its process-wide default registry, not the project's store
        try:
            version = tracking.client(tracking_uri).get_model_version(pinned["name"], pinned["version"])
            return f"runs:/{version.run_id}/model"
        except mlflow.exceptions.MlflowException:
            raise InputError(f"no version {pinned['version']} of {pinned['name']} in {tracking_uri}") from None
    match = ALIAS_URI.fullmatch(model_uri)
    if not match:
        return model_uri  # runs:/..., a local folder: MLflow resolves it
    version = alias_version(model_uri, tracking_uri)
    if version is None:
        raise InputError(f"no version of {match['name']} has the alias {match['alias']} in {tracking_uri}: "
                         "run `dvc repro promote`")
    return f"runs:/{version.run_id}/model"

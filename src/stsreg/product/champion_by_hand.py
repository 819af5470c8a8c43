"""The champion set by hand (``stsreg champion set | rollback``): alias ``champion`` moved to a version without the
gate, after a bad promotion, recorded on the version (``champion.set_by_hand``: when, from which version, why). A
``stsreg serve`` following the alias swaps to it at its next poll."""

from __future__ import annotations

import datetime
import logging
from pathlib import Path

from stsreg.infra import tracking
from stsreg.infra.errors import InputError
from stsreg.product.registry import MODEL_NAME, PREDICTIONS, version_by_alias

log = logging.getLogger(__name__)


def set_champion(version: int, reason: str, name: str = MODEL_NAME, uri: str | None = None) -> dict:
    """Move alias ``champion`` to ``version`` by hand (a rollback after a bad promotion, or a pinned choice), without
    the gate: the version must exist and hold the predictions the gate compares (a stsreg version). The move is
    recorded as tags on the version (``champion.set_by_hand``: when, from which version, ``reason``); a running
    ``stsreg serve`` following the alias swaps to it at its next poll. Returns ``{"champion", "previous"}``."""
    from mlflow.exceptions import MlflowException


    c = tracking.client(uri)
    try:
        mv = c.get_model_version(name, str(version))
    except MlflowException:
        raise InputError(f"{name} has no version {version} in {uri or tracking.tracking_uri()}") from None
    logged = {a.path for a in c.list_artifacts(mv.run_id, Path(PREDICTIONS).parent.as_posix())}
    if PREDICTIONS not in logged:
        raise InputError(f"version {version} of {name} is not a stsreg model version (no {PREDICTIONS} in its run)")
    previous = version_by_alias(c, name, "champion")
    c.set_registered_model_alias(name, "champion", mv.version)
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    was = f"v{previous.version}" if previous else "no champion"
    c.set_model_version_tag(name, mv.version, "champion.set_by_hand", f"{when}: from {was}; {reason}")
    log.info("champion: version %s set by hand (was %s): %s", mv.version, was, reason)
    return {"champion": int(mv.version), "previous": int(previous.version) if previous else None}


def previous_champion(name: str = MODEL_NAME, uri: str | None = None) -> int:
    """The champion before the current one: the latest earlier version the gate promoted or a person set."""

    c = tracking.client(uri)
    current = version_by_alias(c, name, "champion")
    if current is None:
        raise InputError(f"{name} has no champion to roll back")
    earlier = [int(v.version) for v in c.search_model_versions(f"name='{name}'")
               if int(v.version) < int(current.version)
               and (v.tags.get("promotion.decision") == "promoted" or "champion.set_by_hand" in v.tags)]
    if not earlier:
        raise InputError(f"no champion before v{current.version} (no earlier version was promoted or set)")
    return max(earlier)

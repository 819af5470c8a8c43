"""The champion a warm stage 2 starts from, pinned in a file DVC tracks (``champion.json``, in git).

A warm retrain continues the registry's ``@champion``; the alias lives in MLflow, which DVC does not see. So what
stage 2 starts from is written down before ``dvc repro`` runs, in a small file ``dvc.yaml`` lists as a dependency of
stage 2: the registered version, its run and a digest of its weights. Then ``dvc status`` names the file when the
pin moves, ``dvc.lock`` records which champion each stage 2 started from, and ``dvc repro`` of a commit starts from
the version that commit pins (fetched from the registry and checked against the digest), not from whatever the alias
says that day. A project without a champion pins none ("no champion: stage 2 starts from stage 1"), the file a fresh
clone has.

Who moves the pin (:func:`pin_champion`): ``stsreg data add`` (rows arrive: the next retrain continues today's
champion), ``stsreg champion set | rollback`` (a person moved it), ``stsreg champion pin`` (by hand, before a
by-hand ``dvc repro``) and the retrain flow (the trigger, the schedule) — the flow leaves the pin where it is when the
champion is the model this checkout's own stage 2 produced (after a promotion: continuing it on the same data would
learn nothing new, and a clean ``dvc status`` stays clean).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import tempfile
from pathlib import Path

from stsreg.infra import atomic, tracking
from stsreg.infra.errors import InputError
from stsreg.product.model_files import WEIGHTS_TAG, weights_digest

log = logging.getLogger(__name__)

#: The pin, at the project's root (git carries it; ``dvc.yaml`` lists it as a dependency of stage 2).
PIN_FILE = "champion.json"
NO_CHAMPION = "no champion: stage 2 starts from stage 1"


@dataclasses.dataclass(frozen=True)
class Pin:
    """What stage 2 starts from. ``version`` None: stage 1 (``why`` says so); else the registered version with its
    ``run_id``, ``weights`` (:func:`stsreg.product.model_files.weights_digest`, 64 hex) and ``backbone``."""

    version: int | None
    run_id: str | None = None
    weights: str | None = None
    backbone: str | None = None
    why: str = NO_CHAMPION

    def words(self) -> str:
        """"champion v3 (run 1a2b3c4d, weights 9f8e7d6c)" or the reason there is none."""
        if self.version is None:
            return self.why
        return f"champion v{self.version} (run {self.run_id[:8]}, weights {self.weights[:8]})"

    def text(self) -> str:
        """The file's text: sorted keys, one per line (a diff names what moved)."""
        body = {"version": None, "why": self.why} if self.version is None else {
            k: v for k, v in dataclasses.asdict(self).items() if k != "why"}
        return json.dumps(body, indent=2, sort_keys=True) + "\n"


def read_pin(path: Path | str = PIN_FILE) -> Pin:
    """The pin in ``path``; a project without the file pins no champion (its stage 2 starts from stage 1)."""
    path = Path(path)
    if not path.exists():
        return Pin(None, why=f"{NO_CHAMPION} (no {path.name})")

    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
        return Pin(**saved) if saved.get("version") is not None else Pin(None, why=saved.get("why") or NO_CHAMPION)
    except (ValueError, TypeError) as exc:
        raise InputError(f"{path}: not a champion pin ({exc}); `stsreg champion pin` writes it again") from None


def write_pin(pin: Pin, path: Path | str = PIN_FILE) -> bool:
    """Write ``pin`` to ``path`` when it differs from what is there (an unchanged pin keeps its bytes, so DVC sees no
    change); True when the file changed."""
    path = Path(path)
    if path.exists() and path.read_text(encoding="utf-8") == pin.text():
        return False
    atomic.write_text(path, pin.text())
    return True


def current_champion(uri: str | None = None) -> Pin:
    """The registry's ``@champion`` as a :class:`Pin` (the digest from the version's :data:`WEIGHTS_TAG`, or computed
    from a download for a version registered before the tag), or no champion."""
    from stsreg.product import registry

    c = tracking.client(uri)
    mv = registry.version_by_alias(c, registry.MODEL_NAME, "champion")
    if mv is None:
        return Pin(None)
    weights, backbone = mv.tags.get(WEIGHTS_TAG), mv.tags.get("backbone")
    if not weights or not backbone:
        with tempfile.TemporaryDirectory() as tmp:
            folder = registry.model_folder(mv, uri, tmp)
            weights = weights_digest(folder)
            backbone = json.loads((folder / "stsreg_model.json").read_text())["backbone"]
    return Pin(int(mv.version), mv.run_id, weights, backbone)


def pin_champion(path: Path | str = PIN_FILE, uri: str | None = None,
                 own_model: Path | None = None) -> tuple[Pin, bool]:
    """Pin the registry's champion in ``path``: (the pin, whether the file changed). ``own_model`` (the retrain
    flow's ``models/stage2``): when the champion's weights are that folder's, the pin stays where it is (the champion
    is this checkout's own last stage 2: continuing it on the same data learns nothing new)."""
    found = current_champion(uri)
    if own_model is not None and found.version is not None and (Path(own_model) / "stsreg_model.json").exists() \
            and weights_digest(Path(own_model)) == found.weights:
        kept = read_pin(path)
        log.info("champion v%s is this checkout's own stage 2: the pin stays (%s)", found.version, kept.words())
        return kept, False
    changed = write_pin(found, path)
    log.info("%s %s in %s", found.words(), "pinned" if changed else "pinned already", path)
    return found, changed


def pinned_folder(pin: Pin, uri: str | None, dst: str | Path) -> Path:
    """The pinned version's model folder, downloaded into ``dst`` and checked against the pin's digest: a pin names
    one set of weights, so a version that is gone, or whose weights differ, is an error naming the file, not a quiet
    start from something else."""
    from mlflow.exceptions import MlflowException

    from stsreg.product import registry

    c = tracking.client(uri)
    try:
        mv = c.get_model_version(registry.MODEL_NAME, str(pin.version))
    except MlflowException:
        raise InputError(f"{PIN_FILE} pins {pin.words()}, which the registry at {uri or tracking.tracking_uri()} "
                         "does not hold: `stsreg champion pin` pins this registry's champion (or none)") from None
    folder = registry.model_folder(mv, uri, dst)
    got = weights_digest(folder)
    if got != pin.weights:
        raise InputError(f"{PIN_FILE} pins {pin.words()}, but the registry's v{pin.version} has weights {got[:8]}: "
                         "`stsreg champion pin` pins what the registry holds now")
    return folder

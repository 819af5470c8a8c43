"""The served version: a registered stsreg model loaded on its backend, and the poll that follows an alias.

:class:`Served` wraps the version's pyfunc (:class:`~stsreg.product.pyfunc_model.SentencePairModel`: its folder, the
backend and precision it runs, the scale its score is given on) and exposes what the request path needs without
pandas: :meth:`Served.encode` (sentences -> float32 embeddings) and :meth:`Served.pair_scores` (embeddings -> cosine
and the score on the served scale), the same computation as the pyfunc's ``predict``.

:class:`Follower` polls the registry every ``every_s`` seconds for the version behind an alias
(``models:/name@champion``); when the alias moves it loads the new version computing the same way, checks it answers
(one encode), and only then swaps it in. Requests in flight finish on the model that encoded them. A pinned URI
(``models:/name/3``, ``runs:/...``) never moves.
"""

from __future__ import annotations

import logging
import threading

import numpy as np
import torch

from stsreg.infra.quiet import quiet
from stsreg.infra.scales import from_internal
from stsreg.product.serving.model_uri import ALIAS_URI, alias_version
from stsreg.product.serving.server_config import Compute
from stsreg.product.tokens import request_table
from stsreg.infra.runtime import resolve_device
from stsreg.product.precision import serving_precision

log = logging.getLogger(__name__)


class Served:
    """One loaded version, computing as ``compute`` (its scale and backend None: as registered). ``inner`` is None
    for a pyfunc that is not a stsreg model (served through MLflow's own app)."""

    def __init__(self, artifact_uri: str, tracking_uri: str, compute: Compute, version: str | None = None):
        import mlflow.artifacts
        import mlflow.pyfunc


        local = mlflow.artifacts.download_artifacts(artifact_uri=artifact_uri, tracking_uri=tracking_uri)
        # the settings given go in at load, so the model starts on them (an explicit backend is not measured against
        # the others first); keys a version did not log are ignored by MLflow and set below. torch's precision is
        # the one a server may run (auto: fp32 on a bf16 CPU, where bf16 vectors move with their batch)
        setting = compute.precision
        precision = serving_precision(setting, resolve_device())
        given = {"precision": precision, "backend": compute.backend,
                 "scale": list(compute.scale) if compute.scale is not None else None}
        with quiet(warnings=("Add type hints to the `predict` method",), logs={"mlflow.pyfunc": ("Argument(s) ",)}):
            self.pyfunc = mlflow.pyfunc.load_model(local, model_config={k: v for k, v in given.items()
                                                                        if v is not None})
        inner = self.pyfunc.unwrap_python_model()
        self.artifact_uri, self.version = artifact_uri, version
        self.info = {"model_uri": artifact_uri, **({"version": version} if version else {})}
        self.inner = inner if hasattr(inner, "set_precision") else None
        if self.inner is None:
            return
        if compute.backend is not None or compute.threads:
            inner.set_backend(compute.backend or "auto", compute.threads)
        inner.set_precision(precision)  # torch's setting: after the backend is known
        if compute.scale is not None:
            inner.set_scale(*compute.scale)
        self.model, self.batch_size = inner.model, inner.batch_size
        self.info.update(inner.serving_info(), precision_setting=setting)

    @property
    def scale(self) -> tuple[float, float]:
        return self.inner.scale

    def encode(self, sentences: list[str]) -> np.ndarray:
        """(n,) sentences -> (n, d) float32 embeddings (mean-pooled, not normalised), as the pyfunc's ``sentence``
        rows."""
        return self.model.encode(sentences, self.batch_size, show_progress=False).float().numpy()

    def pair_scores(self, u: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(n, d), (n, d) embeddings -> ((n,) cosine, (n,) score on the served scale)."""
        from stsreg.product.sts_eval import embedding_scores

        cosine, score = embedding_scores(self.model, torch.from_numpy(u), torch.from_numpy(v))
        return cosine.astype(float), np.asarray(from_internal(score.astype(float), self.scale), dtype=float)

    @property
    def max_length(self) -> int:
        """Tokens per text the model reads (a longer text is cut)."""
        return self.model.config.max_length

    def tokenize(self, sentences: list[str]) -> tuple[dict, list[int]]:
        """(n,) sentences -> (their token table, the indices of those cut at the model's maximum length)
        (:func:`stsreg.product.tokens.request_table`): what the batcher counts and the encoder reads."""
        return request_table(sentences, self.model.tokenizer, self.model.config.max_length)

    def encode_tokens(self, table: dict) -> np.ndarray:
        """A :meth:`tokenize` table of n sentences -> (n, d) float32 embeddings, as :meth:`encode`."""
        return self.model.encode_tokens(table, self.batch_size, show_progress=False).float().numpy()


class Follower:
    """Polls ``model_uri``'s alias every ``every_s`` s; ``swap(new Served)`` is called once a moved alias's version is
    loaded and has answered. ``current_version()`` is the version now served."""

    def __init__(self, model_uri: str, tracking_uri: str, compute: Compute, every_s: float, current_version, swap):
        self.model_uri, self.tracking_uri, self.compute, self.every_s = model_uri, tracking_uri, compute, every_s
        self.current_version, self.swap = current_version, swap
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name=f"follow {model_uri}", daemon=True)

    def start(self) -> "Follower":
        if self.every_s > 0 and ALIAS_URI.fullmatch(self.model_uri):
            self.thread.start()
        return self

    def check(self) -> bool:
        """One poll: swap in the alias's version if it moved; returns whether it did."""
        version = alias_version(self.model_uri, self.tracking_uri)
        if version is None or str(version.version) == str(self.current_version()):
            return False
        log.info("%s moved to version %s: loading it", self.model_uri, version.version)
        new = Served(f"runs:/{version.run_id}/model", self.tracking_uri, self.compute, str(version.version))
        if new.inner is not None:
            new.encode(["a readiness probe"])  # it answers before it serves
        self.swap(new)
        log.info("now serving version %s of %s", version.version, self.model_uri)
        return True

    def _run(self) -> None:
        failing = False
        while not self.stop.wait(self.every_s):
            try:
                self.check()
            except Exception as exc:  # noqa: BLE001 (a registry hiccup must not stop serving; the next poll tries again)
                if not failing:  # once per outage, not every poll
                    log.warning("following %s failed (%s: %s); still serving version %s, polling every %g s",
                                self.model_uri, type(exc).__name__, exc, self.current_version(), self.every_s)
                failing = True
                continue
            if failing:
                log.warning("following %s: the registry answers again (serving version %s)", self.model_uri,
                            self.current_version())
            failing = False

"""What a serving process is built from, as typed objects: :class:`ServerConfig` is what ``stsreg serve`` resolves
from its flags and ``serve.*`` (:class:`stsreg.infra.settings_operations.ServeParams`), what
:func:`stsreg.product.serving.serve.build_app` builds an app from, and what each worker process of a multi-process
server receives whole (as JSON). Its parts go where they are used:

- :class:`Compute` -> :class:`stsreg.product.serving.served.Served` (and the alias's follower): how the model computes;
- :class:`Admission` -> :class:`stsreg.product.serving.batcher.TokenBatcher` (through the app): how requests are
  batched and when one is refused;
- the body limits (``max_body_bytes``, ``max_depth``, ``body_timeout_s``) -> the request guard.

``serve.request_timeout_s`` (one setting, one flag) fills two fields here because it means two things:
``body_timeout_s`` (a body must arrive within it, else 408) and ``Admission.answer_within_s`` (a request is admitted
only if the encoder will have answered it within it, else 429).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from stsreg.infra.settings_operations import ServeParams

#: A request body over this is refused (413) before it is parsed.
DEFAULT_MAX_BODY_BYTES = 32 * 1024 * 1024
#: JSON nested deeper than this is refused (400); ``dataframe_records`` needs 3 levels, ``dataframe_split`` 4.
DEFAULT_MAX_DEPTH = 32
#: ``serve.*``'s declared defaults: the fields below that are settings take theirs from here.
_SERVE = ServeParams()


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Compute(_Frozen):
    """How the served model computes. ``precision``: auto | fp32 | bf16
    (:func:`stsreg.product.precision.serving_precision`); ``scale``: [lo, hi] of the served ``score`` (None: the scale
    the version was registered with); ``backend``: torch | onnx | onnx-int8 | auto (None: the version's registered
    setting); ``threads``: intra-op threads (0: the runtime's default, the cores)."""

    precision: str = _SERVE.precision
    scale: tuple[float, float] | None = None
    backend: str | None = None
    threads: int = _SERVE.threads


class Admission(_Frozen):
    """How requests reach the encoder: batches of up to ``batch_tokens`` tokens, at most ``max_queued_tokens`` queued
    (then 429; a request larger than that alone, 413), a text over the model's maximum length cut and said
    (``truncate``) or refused (413); ``answer_within_s``: a request is admitted only if, served fairly, the encoder
    will have answered it within this at its measured rate (None: the token bound only)."""

    batch_tokens: int = _SERVE.batch_tokens
    max_queued_tokens: int = _SERVE.max_queued_tokens
    truncate: bool = _SERVE.truncate
    answer_within_s: float | None = None


class ServerConfig(_Frozen):
    """One serving process: the version at ``artifact_uri`` (what :func:`stsreg.product.serving.model_uri.resolve`
    gives; fetched from ``tracking_uri``), asked for as ``model_uri`` (an alias is polled every ``follow_s`` s and a
    moved alias's version swapped in; 0: never), computed as ``compute``, admitted as ``admission``; bodies up to
    ``max_body_bytes`` nested at most ``max_depth`` deep, each arriving within ``body_timeout_s``; on SIGTERM the
    requests in flight get ``drain_s``."""

    artifact_uri: str
    tracking_uri: str
    model_uri: str | None = None
    follow_s: float = 0.0
    compute: Compute = Compute()
    admission: Admission = Admission(answer_within_s=_SERVE.request_timeout_s)
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    max_depth: int = DEFAULT_MAX_DEPTH
    body_timeout_s: float = _SERVE.request_timeout_s
    drain_s: float = _SERVE.drain_s

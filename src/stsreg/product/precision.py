"""Reduced precision where the hardware has it: bf16 autocast for encoding, evaluation and stage-2 training.

``model.precision`` in params.yaml picks the mode:

- ``fp32``: everything in float32 (the fallback, and the only mode on CPUs without native bf16);
- ``bf16``: ``torch.autocast`` with bfloat16 (matmuls in bf16, weights, optimizer state and losses in fp32);
- ``auto``: bf16 only when the device computes it natively (CPU flags ``avx512_bf16`` or ``amx_bf16``; a CUDA
  GPU that reports bf16 support) **and** a probe on the model's own weights shows the embeddings hold: every
  probe sentence's bf16 embedding has cosine >= :data:`PROBE_MIN_COSINE` with its fp32 one. Otherwise fp32.

Measured on an AMD EPYC with avx512_bf16 (2 cores, all-MiniLM-L6-v2, ``make bench``): encoding ~1.5x faster,
STS-B test Spearman 82.05 against 82.03 in fp32. Without native bf16, CPU bf16 is emulated and slower: ``auto``
never picks it there.

    >>> with autocast(model.amp_dtype, model.device):   # a no-op context when the dtype is None (fp32)
    ...     u, v, score = model(features_a, features_b)
"""

from __future__ import annotations

import contextlib
import logging

import torch
import torch.nn.functional as F

from stsreg.infra.runtime import cpu_flags, resolve_device

log = logging.getLogger(__name__)

PRECISIONS = ("auto", "fp32", "bf16")
#: ``auto`` keeps bf16 only if every probe embedding has at least this cosine with its fp32 twin.
PROBE_MIN_COSINE = 0.995
#: Short and long, plain and odd: the probe sentences ``auto`` encodes twice (fp32, bf16).
PROBE_SENTENCES = (
    "A man is playing a guitar.",
    "Someone plays music on stage while the crowd sings along.",
    "The stock market fell sharply after the central bank raised interest rates by half a point.",
    "no",
    "A cat sits on a mat, looking out of the window at the birds in the garden of the old house.",
    "3 killed, 12 injured in a bus crash near the border on Tuesday night",
    "How do I learn to write Python code quickly?",
    "The quick brown fox jumps over the lazy dog.",
)


def native_bf16(device: torch.device) -> bool:
    """Whether ``device`` computes bf16 matmuls in hardware (CPU: avx512_bf16 / AMX; CUDA: bf16-capable GPU)."""
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    if device.type == "cpu":
        return bool({"avx512_bf16", "amx_bf16"} & cpu_flags())
    return False


def autocast(dtype: torch.dtype | None, device: torch.device):
    """``torch.autocast`` for ``dtype`` on ``device``; a no-op context for ``None`` (fp32)."""
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype)


@torch.no_grad()
def probe_holds(embed, tokenize, device: torch.device) -> tuple[bool, float]:
    """Encode :data:`PROBE_SENTENCES` in fp32 and in bf16 autocast: (holds, the lowest cosine between the two).

    ``embed``: tokenized batch -> (batch, d) embeddings; ``tokenize``: sentences -> tensors (both from the model).
    """
    feats = {k: v.to(device) for k, v in tokenize(list(PROBE_SENTENCES)).items()}
    ref = embed(feats).float()
    with autocast(torch.bfloat16, device):
        low = embed(feats).float()
    worst = float(F.cosine_similarity(ref, low, dim=-1).min())
    return worst >= PROBE_MIN_COSINE, worst


def resolve(mode: str, device: torch.device, embed=None, tokenize=None) -> torch.dtype | None:
    """``mode`` (auto | fp32 | bf16) on ``device`` -> the autocast dtype (``torch.bfloat16``) or ``None`` (fp32).

    ``auto`` needs ``embed`` and ``tokenize`` for its probe (see the module docstring).
    """
    if mode not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {mode!r}")
    if mode == "fp32":
        return None
    if mode == "bf16":
        return torch.bfloat16
    if not native_bf16(device):
        return None
    holds, worst = probe_holds(embed, tokenize, device)
    if not holds:
        log.warning("precision auto: bf16 embeddings drift from fp32 (lowest probe cosine %.4f < %.3f): using fp32",
                    worst, PROBE_MIN_COSINE)
        return None
    return torch.bfloat16


def cache_name(mode: str, device: torch.device | None = None) -> str:
    """What ``mode`` resolves to on ``device`` (default: this process's), without a model: ``fp32`` or ``bf16``;
    ``auto`` names bf16 where the device computes it natively. The key of cached runs and models, so that a folder
    trained in bf16 is never reused by an fp32 run or the reverse (``auto``'s probe, which may still keep fp32 for a
    model whose embeddings drift, needs the model; a run keyed ``bf16`` then holds fp32 results, never the reverse)."""
    if mode != "auto":
        return mode
    return "bf16" if native_bf16(device or resolve_device()) else "fp32"


def describe(dtype: torch.dtype | None) -> str:
    """The resolved precision as a params-style name: ``bf16`` or ``fp32``."""
    return "bf16" if dtype == torch.bfloat16 else "fp32"


def serving_precision(setting: str, device: torch.device) -> str:
    """The precision a server runs torch in for ``serve.precision`` = ``setting``: ``auto`` on a CPU with native bf16
    is ``fp32`` there, because a served text's vector must not depend on the batch it lands in, and CPU bf16 kernels
    round a sentence differently with other sentences beside it (measured on an EPYC with AVX-512 + bf16: 4.06e-3
    max abs difference, against the 1e-5 that fp32 and the ONNX backends hold). Anything else is kept (``bf16``
    asked for by name runs bf16; a GPU's ``auto`` may take bf16)."""
    return "fp32" if setting == "auto" and device.type == "cpu" and native_bf16(device) else setting

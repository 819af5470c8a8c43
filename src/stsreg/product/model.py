"""The Siamese regression model: a shared encoder, pooling, and a one-node head on ``[u, v, |u-v|]``.

    >>> from stsreg.product.model import SiameseRegressor
    >>> m = SiameseRegressor.from_pretrained("default")          # the packaged all-MiniLM-L6-v2
    >>> emb = m.encode(["A man plays a guitar.", "Someone plays music."])   # (2, 384) float32
    >>> m.save("out/model"); m2 = SiameseRegressor.load("out/model")

Shapes: ``encode`` returns ``(n, d)``; ``forward(features_a, features_b)`` returns ``(batch,)`` raw head
scores on the label scale of whatever the head was trained on (NLI 0-2, STS 0-5). At evaluation the head is
not used: the pair score is ``cosine(u, v)``. ``predict(u, v)`` is the served 0-5 similarity: the head's output,
or, for a model whose stage 2 trained the cosine (``config.score_map = [a, b]``), ``clamp(a * cos + b, 0, 5)``,
the map that stage trained (the head is then stale: the encoder moved under it).

``precision`` (auto | fp32 | bf16) sets the autocast dtype of encoding and training
(:mod:`stsreg.product.precision`: ``auto`` is bf16 only on hardware with native bf16 and when a probe shows the
embeddings hold); weights are always stored in fp32. It is a setting of the run, not of the weights: the runner
passes ``params.model.precision`` to :meth:`SiameseRegressor.from_params` / :meth:`SiameseRegressor.load`, and a saved
folder does not record it (so nothing on disk can contradict params.yaml).

The saved folder is loadable by ``sentence_transformers.SentenceTransformer(path)`` (encoder + pooling
config); the head is ``head.safetensors``; the resolved model config is ``stsreg_model.json``.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from torch import nn
from transformers import AutoModel, AutoTokenizer

from stsreg.product import precision as amp
from stsreg.product import tokens
from stsreg.product.backbones import resolve_backbone  # noqa: F401  (re-exported: the one resolution rule)
from stsreg.infra import progress

DEFAULT_BACKBONE = "default"
@dataclass
class ModelConfig:
    backbone: str = DEFAULT_BACKBONE
    pooling: str = "mean"  # mean | cls
    max_length: int = 256
    score_map: list[float] | None = None  # [a, b]: served score = clamp(a*cos+b, 0, 5); None: the head's output


def pool(hidden: torch.Tensor, mask: torch.Tensor, mode: str) -> torch.Tensor:
    """(batch, seq, d) hidden states + (batch, seq) attention mask -> (batch, d) sentence embeddings."""
    if mode == "cls":
        return hidden[:, 0]
    if mode != "mean":
        raise ValueError(f"pooling must be 'mean' or 'cls', got {mode!r}")
    m = mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * m).sum(1) / m.sum(1).clamp(min=1e-9)


def pair_features(u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """(batch, d), (batch, d) -> (batch, 3d): the paper's ``[u, v, |u-v|]``."""
    return torch.cat([u, v, (u - v).abs()], dim=-1)


def weights_fingerprint(module: nn.Module) -> str:
    """sha256 over a module's state dict (names, shapes, bytes): identifies exact weights."""
    h = hashlib.sha256()
    for name, tensor in module.state_dict().items():
        h.update(name.encode())
        h.update(str(tuple(tensor.shape)).encode())
        h.update(tensor.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


class SiameseRegressor(nn.Module):
    """Shared encoder + pooling + ``Linear(3d, 1)`` head (3d + 1 parameters; 1,153 for d=384)."""

    def __init__(self, encoder: nn.Module, tokenizer, config: ModelConfig, precision: str = "auto"):
        super().__init__()
        #: auto | fp32 | bf16: the autocast mode of this run (:attr:`amp_dtype`); not saved with the weights.
        self.precision = precision
        #: Folder of cached token tables (:mod:`stsreg.product.tokens`); None: tokenize in memory. Not part of the saved
        #: model (a machine's cache location): the runners set it, serving leaves it None.
        self.token_cache: Path | None = None
        self.encoder = encoder
        self.tokenizer = tokenizer
        self.config = config
        self.dim = encoder.config.hidden_size
        self.head = nn.Linear(3 * self.dim, 1)
        self._amp: tuple | None = None  # (device, precision mode, resolved dtype): the auto probe runs once
        #: What runs the encoder in :meth:`embed` when not torch: a callable from a tokenized batch to its (batch, seq,
        #: d) float32 hidden states, e.g. an ONNX Runtime session
        #: (:class:`stsreg.product.serving.backends.onnx_fp32.OnnxEncoder`); None:
        #: :attr:`encoder`. Set by :func:`stsreg.product.serving.export.use_backend`; not part of the saved model.
        self.runtime = None

    # -- construction / persistence -------------------------------------------------------------
    @classmethod
    def from_pretrained(cls, backbone: str = DEFAULT_BACKBONE, pooling: str = "mean", max_length: int = 256,
                        precision: str = "auto") -> "SiameseRegressor":
        path = resolve_backbone(backbone)
        encoder = AutoModel.from_pretrained(path)
        tokenizer = AutoTokenizer.from_pretrained(path)
        return cls(encoder, tokenizer, ModelConfig(backbone=backbone, pooling=pooling, max_length=max_length),
                   precision=precision)

    @classmethod
    def from_params(cls, m) -> "SiameseRegressor":
        """The backbone as params.yaml's ``model`` section (:class:`stsreg.infra.config.ModelParams`) describes it."""
        return cls.from_pretrained(m.backbone, pooling=m.pooling, max_length=m.max_length, precision=m.precision)

    def save(self, path: str | os.PathLike) -> Path:
        """Write a SentenceTransformer-loadable folder + ``head.safetensors`` + ``stsreg_model.json``."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        enc = self.encoder.module if hasattr(self.encoder, "module") else self.encoder
        enc.save_pretrained(path, safe_serialization=True)
        self.tokenizer.save_pretrained(path)
        save_file({k: v.detach().cpu().contiguous() for k, v in self.head.state_dict().items()},
                  str(path / "head.safetensors"))
        (path / "stsreg_model.json").write_text(json.dumps(asdict(self.config), indent=2))
        # sentence-transformers layout: Transformer module at the root, pooling in 1_Pooling
        (path / "modules.json").write_text(json.dumps([
            {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}], indent=2))
        (path / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": self.config.max_length,
                                                                    "do_lower_case": False}))
        (path / "1_Pooling").mkdir(exist_ok=True)
        (path / "1_Pooling/config.json").write_text(json.dumps({
            "word_embedding_dimension": self.dim, "pooling_mode_cls_token": self.config.pooling == "cls",
            "pooling_mode_mean_tokens": self.config.pooling == "mean", "pooling_mode_max_tokens": False,
            "pooling_mode_mean_sqrt_len_tokens": False}, indent=2))
        return path

    @classmethod
    def load(cls, path: str | os.PathLike, precision: str = "auto") -> "SiameseRegressor":
        """A folder written by :meth:`save`, run in ``precision`` (auto | fp32 | bf16)."""
        path = Path(path)
        saved = json.loads((path / "stsreg_model.json").read_text())
        saved.pop("precision", None)  # folders saved before precision became a run setting recorded it
        model = cls(AutoModel.from_pretrained(path), AutoTokenizer.from_pretrained(path), ModelConfig(**saved),
                    precision)
        model.head.load_state_dict(load_file(str(path / "head.safetensors")))
        return model

    # -- compute ----------------------------------------------------------------------------------
    def tokenize(self, sentences: list[str]) -> dict[str, torch.Tensor]:
        """Dynamic padding: pad to the longest sentence of this batch, truncate at ``max_length``."""
        return self.tokenizer(sentences, padding=True, truncation=True, max_length=self.config.max_length,
                              return_tensors="pt")

    def pretokenize(self, sentences: list[str]):
        """(n,) sentences -> their token table (:func:`stsreg.product.tokens.token_table`): ids per sentence, unpadded,
        truncated at ``max_length``, read from :attr:`token_cache` when it holds them; :meth:`collate` pads any rows."""
        return tokens.token_table(sentences, self.tokenizer, self.config.max_length, self.token_cache)

    def collate(self, table, idx: list[int]) -> dict[str, torch.Tensor]:
        """Rows ``idx`` of a :meth:`pretokenize` table -> a batch padded to its longest row, on the model's device."""
        batch = self.tokenizer.pad(tokens.rows(table, idx), return_tensors="pt")
        return {k: v.to(self.device) for k, v in batch.items()}

    @property
    def amp_dtype(self) -> torch.dtype | None:
        """The autocast dtype :attr:`precision` resolves to on the current device (None = fp32); see
        :mod:`stsreg.product.precision`. ``auto`` probes the weights once per device. An ONNX :attr:`runtime` computes
        in its own precision: None then."""
        if self.runtime is not None:
            return None
        key = (self.device, self.precision)
        if self._amp is None or self._amp[:2] != key:
            was_training = self.training
            self.eval()  # the probe compares deterministic embeddings (no dropout)
            try:
                dtype = amp.resolve(self.precision, self.device, self.embed, self.tokenize)
            finally:
                self.train(was_training)
            self._amp = (*key, dtype)
        return self._amp[2]

    def autocast(self):
        """Context running the encoder in :attr:`amp_dtype` (a no-op for fp32)."""
        return amp.autocast(self.amp_dtype, self.device)

    def embed(self, features: dict[str, torch.Tensor]) -> torch.Tensor:
        """Tokenized batch -> (batch, d) pooled embeddings (with gradients if enabled; :attr:`runtime` when set)."""
        if self.runtime is not None:
            hidden = self.runtime(features)
        else:
            hidden = self.encoder(input_ids=features["input_ids"], attention_mask=features["attention_mask"],
                                  **({"token_type_ids": features["token_type_ids"]} if "token_type_ids" in features
                                     else {})).last_hidden_state
        return pool(hidden, features["attention_mask"], self.config.pooling)

    def score_embeddings(self, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """(batch, d), (batch, d) -> (batch,) head scores."""
        return self.head(pair_features(u, v)).squeeze(-1)

    def predict(self, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """(batch, d), (batch, d) -> (batch,) served similarity on the 0-5 STS scale (see the module docstring)."""
        if self.config.score_map is None:
            return self.score_embeddings(u, v)
        a, b = self.config.score_map
        return (a * F.cosine_similarity(u, v, dim=-1) + b).clamp(0.0, 5.0)

    def forward(self, features_a: dict, features_b: dict) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Two tokenized batches -> ``(u, v, score)``: (batch, d), (batch, d), (batch,) head scores."""
        u, v = self.embed(features_a), self.embed(features_b)
        return u, v, self.score_embeddings(u, v)

    @property
    def device(self) -> torch.device:
        return self.head.weight.device

    @torch.no_grad()
    def encode(self, sentences: list[str], batch_size: int = 64, show_progress: bool | None = None,
               normalize: bool = False) -> torch.Tensor:
        """(n,) sentences -> (n, d) float32 embeddings on CPU, in input order.

        Batches are sorted by token length so each pads little; eval mode for the call, restored after; the
        encoder runs in :attr:`amp_dtype` (bf16 autocast where :attr:`precision` resolves to it).
        """
        # tokenize once without padding; each length-sorted batch is then padded to its own longest row
        return self.encode_tokens(self.pretokenize(sentences), batch_size, show_progress, normalize)

    @torch.no_grad()
    def encode_tokens(self, ids, batch_size: int = 64, show_progress: bool | None = None,
                      normalize: bool = False) -> torch.Tensor:
        """A :meth:`pretokenize` table of n sentences -> (n, d) float32 embeddings on CPU, in its order (what
        :meth:`encode` runs once the sentences are tokenized; the server tokenizes apart, to batch by tokens)."""
        was_training = self.training
        self.eval()
        n_tokens = tokens.lengths(ids)
        order = sorted(range(len(n_tokens)), key=lambda i: -n_tokens[i])
        out = torch.empty(len(n_tokens), self.dim)
        shown = show_progress is not False  # None / True: a bar on a terminal, a line every 30 s in logs
        try:
            with self.autocast():
                for start in progress.bar(range(0, len(order), batch_size), desc="encode", unit="batch", enabled=shown):
                    idx = order[start:start + batch_size]
                    out[idx] = self.embed(self.collate(ids, idx)).float().cpu()
        finally:
            self.train(was_training)
        return F.normalize(out, dim=-1) if normalize else out

"""Transformer systems of the comparative study, on any Hugging Face name or local path (offline: the packaged
all-MiniLM-L6-v2, ``default``). All train on MSE against the STS label / 5
(:func:`stsreg.experiments.baselines.fit.fit`).

Bi-encoders (:class:`TransformerBiEncoder`, cosine of two sentence embeddings):

- ``cls_projection``: the ``[CLS]`` output through a ``d x d`` linear projection (the study's BERT / ALBERT /
  RoBERTa rows);
- ``mean``: mean pooling, no projection (S-BERT's regression objective);
- ``mean_gelu``: mean pooling through ``Linear(d, 768)`` + GeLU (the study's S-LLM), with every weight trained, or
  with LoRA adapters (``peft``: rank 16, alpha 32 on the attention and MLP projections; the encoder's own weights
  frozen, the projection trained).

Cross-encoders (:class:`CrossEncoder`, both sentences in one input ``[CLS] s1 [SEP] s2 [SEP]``, no sentence
embedding): the ``[CLS]`` output through ``sigmoid(W z)`` (``head="linear"``) or Linear(d, 512) -> ReLU ->
Linear(512, 1) -> sigmoid (``head="mlp"``, the study's "(MLP+sigmoid)" rows). Score 0-1.

Precision: :func:`set_precision` resolves ``model.precision`` (auto | fp32 | bf16, :mod:`stsreg.product.precision`) for
a transformer system; ``auto`` probes the encoder's own mean-pooled states in fp32 against bf16.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import AutoModel, AutoTokenizer

from stsreg.product import precision as amp
from stsreg.experiments.baselines.scoring import BiEncoder, PairScorer
from stsreg.product.model import pool, resolve_backbone

#: Module names LoRA adapts (BERT-family attention and MLP projections; Qwen / Llama names for S-LLM backbones).
LORA_TARGETS = ("query", "key", "value", "dense", "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                "down_proj")


def _load(backbone: str):
    path = resolve_backbone(backbone)
    return AutoModel.from_pretrained(path), AutoTokenizer.from_pretrained(path)


def _describe(backbone: str) -> str:
    return "all-MiniLM-L6-v2 (packaged)" if backbone == "default" else backbone


def _features(encoder, batch: dict, device) -> torch.Tensor:
    """Tokenized batch -> (batch, seq, d) last hidden states."""
    return encoder(**{k: v.to(device) for k, v in batch.items()}).last_hidden_state


def set_precision(model: "TransformerBiEncoder | CrossEncoder", mode: str) -> None:
    """Set ``model.amp_dtype`` from ``mode`` (auto | fp32 | bf16) on the model's device. ``auto``: bf16 where the
    device has it natively and the encoder's mean-pooled states of the probe sentences stay within the probe's
    cosine in bf16 (the head is not probed: it is a linear map of the same states). A reduced precision is named
    in ``model.runs_on`` (the table's "runs on" column)."""

    def embed(feats: dict) -> torch.Tensor:
        return pool(model.encoder(**feats).last_hidden_state, feats["attention_mask"], "mean")

    def tokenize(sentences: list[str]) -> dict:
        return model.tokenizer(sentences, padding=True, truncation=True, max_length=model.max_length,
                               return_tensors="pt")

    model.amp_dtype = amp.resolve(mode, model.device, embed, tokenize)
    if model.amp_dtype is not None:
        model.runs_on += f", {amp.describe(model.amp_dtype)} autocast"


def _token_counts(tokenizer, first: list[str], second: list[str] | None, max_length: int) -> list[int]:
    """Tokens of each input (a sentence, or a pair read together), special tokens included, after truncation."""
    ids = tokenizer(list(first), list(second) if second is not None else None, truncation=True,
                    max_length=max_length)["input_ids"]
    return [len(x) for x in ids]


class TransformerBiEncoder(BiEncoder):
    """Siamese transformer: ``encode`` -> (batch, d) or (batch, projection_dim)."""

    def __init__(self, backbone: str, pooling: str, projection: str | None = None, projection_dim: int = 768,
                 max_length: int = 128, lora: dict | None = None):
        super().__init__()
        self.encoder, self.tokenizer = _load(backbone)
        self.max_length, self.pooling = max_length, pooling
        d = self.encoder.config.hidden_size
        if projection is None:
            self.projection = nn.Identity()
        elif projection == "linear":  # d x d
            self.projection = nn.Linear(d, d)
        elif projection == "gelu":
            self.projection = nn.Sequential(nn.Linear(d, projection_dim), nn.GELU())
        else:
            raise ValueError(f"projection must be None, 'linear' or 'gelu', got {projection!r}")
        for name, param in self.encoder.named_parameters():
            if name.startswith("pooler."):  # unused by mean / CLS-hidden pooling: no gradient, no decay
                param.requires_grad_(False)
        self.runs_on = _describe(backbone)
        if lora:
            from peft import LoraConfig, get_peft_model

            present = {n.rsplit(".", 1)[-1] for n, _ in self.encoder.named_modules()}
            cfg = LoraConfig(r=lora["r"], lora_alpha=lora["alpha"], lora_dropout=lora.get("dropout", 0.05),
                             target_modules=[t for t in LORA_TARGETS if t in present])
            self.encoder = get_peft_model(self.encoder, cfg)
            self.runs_on += f", LoRA r={lora['r']} alpha={lora['alpha']}"

    @property
    def device(self) -> torch.device:
        return next(self.encoder.parameters()).device

    def pair_lengths(self, s1: list[str], s2: list[str]) -> list[int]:
        """Tokens of the longer sentence of each pair (each side pads to its own longest: this bounds both)."""
        a, b = (_token_counts(self.tokenizer, s, None, self.max_length) for s in (s1, s2))
        return [max(x, y) for x, y in zip(a, b)]

    def encode(self, sentences: list[str]) -> torch.Tensor:
        batch = self.tokenizer(list(sentences), padding=True, truncation=True, max_length=self.max_length,
                               return_tensors="pt")
        hidden = _features(self.encoder, batch, self.device)
        return self.projection(pool(hidden, batch["attention_mask"].to(self.device), self.pooling))


class CrossEncoder(PairScorer):
    """Both sentences in one input; ``forward`` -> (batch,) sigmoid score 0-1 from the ``[CLS]`` output."""

    def __init__(self, backbone: str, head: str, max_length: int = 128, mlp_hidden: int = 512):
        super().__init__()
        self.encoder, self.tokenizer = _load(backbone)
        self.max_length = max_length
        d = self.encoder.config.hidden_size
        if head == "linear":
            self.head = nn.Linear(d, 1)
        elif head == "mlp":
            self.head = nn.Sequential(nn.Linear(d, mlp_hidden), nn.ReLU(), nn.Linear(mlp_hidden, 1))
        else:
            raise ValueError(f"head must be 'linear' or 'mlp', got {head!r}")
        for name, param in self.encoder.named_parameters():
            if name.startswith("pooler."):
                param.requires_grad_(False)
        self.runs_on = _describe(backbone)

    @property
    def device(self) -> torch.device:
        return next(self.encoder.parameters()).device

    def pair_lengths(self, s1: list[str], s2: list[str]) -> list[int]:
        """Tokens of each pair read together (what a cross-encoder's batch pads to)."""
        return _token_counts(self.tokenizer, s1, s2, self.max_length)

    def forward(self, s1: list[str], s2: list[str]) -> torch.Tensor:
        # pair truncation: max_length covers both sentences together
        batch = self.tokenizer(list(s1), list(s2), padding=True, truncation=True, max_length=self.max_length,
                               return_tensors="pt")
        cls = _features(self.encoder, batch, self.device)[:, 0]
        # the head in fp32 whatever the encoder's autocast: a bf16 sigmoid has ~3 digits, and scores that tie
        # lose rank information (Spearman is all this score is judged on)
        with torch.autocast(self.device.type, enabled=False):
            return torch.sigmoid(self.head(cls.float())).squeeze(-1)

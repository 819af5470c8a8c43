"""Tiny randomly initialised backbones of several architectures, saved as local folders: what "any Hugging Face
backbone" has to load, tokenize (with or without ``token_type_ids``), train, evaluate and export."""

from __future__ import annotations

from pathlib import Path

#: architecture -> what sets it apart from BERT for this project's code
ARCHITECTURES = {
    "bert": "WordPiece, token_type_ids, absolute positions",
    "mpnet": "no token_type_ids, relative position buckets (all-mpnet-base-v2's architecture)",
    "roberta": "byte-level BPE, no token_type_ids, positions offset past the padding index",
}


def _bpe(words: list[str], folder: Path) -> tuple[str, str]:
    """A byte-level BPE (RoBERTa's) trained on ``words``, its vocab.json and merges.txt written to ``folder``."""
    from tokenizers import ByteLevelBPETokenizer

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator([" ".join(words)] * 4, vocab_size=400, min_frequency=1, show_progress=False,
                            special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    folder.mkdir(parents=True, exist_ok=True)
    vocab, merges = bpe.save_model(str(folder))
    return vocab, merges


def tiny_backbone_of(arch: str, path: Path, words: list[str]) -> str:
    """Save a 2-layer, d=32 model of ``arch`` (:data:`ARCHITECTURES`) with a vocab covering ``words`` to ``path``."""
    import torch
    import transformers as tf

    special = {"bert": ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"],
               "mpnet": ["<s>", "<pad>", "</s>", "[UNK]", "<mask>"]}
    sizes = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                 max_position_embeddings=64)
    if arch in special:
        vocab = {t: i for i, t in enumerate(special[arch] + [".", ","] + list(words))}
    if arch == "bert":
        tok = tf.BertTokenizerFast(vocab=vocab, do_lower_case=True)  # transformers 5: pass vocab=, not vocab_file=
        torch.manual_seed(0)
        model = tf.BertModel(tf.BertConfig(vocab_size=len(vocab), hidden_dropout_prob=0.1,
                                           attention_probs_dropout_prob=0.1, **sizes))
    elif arch == "mpnet":
        tok = tf.MPNetTokenizerFast(vocab=vocab, do_lower_case=True)
        torch.manual_seed(0)
        model = tf.MPNetModel(tf.MPNetConfig(vocab_size=len(vocab), pad_token_id=1, **sizes))
    elif arch == "roberta":
        tok = tf.RobertaTokenizerFast(*_bpe(list(words), Path(path) / "bpe"))
        torch.manual_seed(0)
        model = tf.RobertaModel(tf.RobertaConfig(vocab_size=len(tok), type_vocab_size=1, pad_token_id=1, **sizes))
    else:
        raise ValueError(f"no tiny {arch!r}: one of {sorted(ARCHITECTURES)}")
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return str(path)


def exported_model(backbone: str, folder: Path, max_length: int) -> Path:
    """A stsreg model folder of ``backbone`` at ``max_length`` with every declared backend's export (what
    registration adds)."""
    from stsreg.product.model import SiameseRegressor
    from stsreg.product.serving import export

    SiameseRegressor.from_pretrained(backbone, max_length=max_length).save(folder)
    export.export_all(folder)
    return folder


def random_sentences(words, n: int, seed: int, lo: int, hi: int) -> list[str]:
    """``n`` sentences of ``lo`` to ``hi`` words drawn from ``words``, the same for the same seed."""
    import random

    rng = random.Random(seed)
    return [" ".join(rng.choice(words) for _ in range(rng.randint(lo, hi))) for _ in range(n)]

"""The files of a saved model folder that other tools read: sentence-transformers' similarity config, the one
maximum length every loader of the folder truncates at, and the rows a stage-2 model was trained from."""

from __future__ import annotations

import hashlib
import json
from importlib.metadata import version
from pathlib import Path

ST_CONFIG = "config_sentence_transformers.json"  # sentence-transformers' file: the similarity function, the versions
# a stage-2 folder's (n,) uint64 hashes of the train rows its training was drawn from
# (stsreg.product.training.replay.row_hashes): a warm retrain from it tells its old rows from new ones by these
TRAIN_ROWS = "train_rows.npy"
#: The model version tag :func:`stsreg.product.registry.log_and_register` writes: :func:`weights_digest` of the
#: registered folder (what a champion pin names, :mod:`stsreg.product.champion_pin`).
WEIGHTS_TAG = "weights.sha256"


def write_st_config(folder: Path) -> None:
    """``config_sentence_transformers.json`` in a saved folder: cosine similarity (what every score of this project
    is), and the library versions that wrote it, so ``SentenceTransformer(folder).similarity`` is the project's
    score."""
    versions = {p: version(p) for p in ("sentence-transformers", "transformers", "torch")}
    (Path(folder) / ST_CONFIG).write_text(json.dumps({"__version__": versions, "similarity_fn_name": "cosine",
                                                      "model_type": "SentenceTransformer", "prompts": {},
                                                      "default_prompt_name": None}, indent=2))


def set_max_length(folder: Path, max_length: int) -> None:
    """The one maximum length of a model folder: stsreg's config and sentence-transformers' both say ``max_length``,
    so every command that loads the folder (encode, serve, sentence-transformers) truncates where it was scored."""
    for name, key in (("stsreg_model.json", "max_length"), ("sentence_bert_config.json", "max_seq_length")):
        config = json.loads((folder / name).read_text())
        config[key] = max_length
        (folder / name).write_text(json.dumps(config, indent=2))


def weights_digest(folder: Path) -> str:
    """sha256 (64 hex) over a model folder's ``*.safetensors`` files (the encoder's and the head's weights), names and
    bytes in name order: what a registered version and a downloaded copy of it share, whatever else the card adds."""
    h = hashlib.sha256()
    for path in sorted(Path(folder).glob("*.safetensors")):
        h.update(path.name.encode() + b"\0")
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()

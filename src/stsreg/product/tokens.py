"""Token ids of a list of sentences, computed once and reused: a `datasets` table cached on disk by fingerprint.

    >>> table = token_table(["A man plays.", "Music."], tokenizer, 128, Path("cache/tokens"))
    >>> rows(table, [1, 0])      # {"input_ids": [[...], [...]], "attention_mask": [...], ...}, unpadded
    >>> lengths(table)           # [5, 3]: tokens per sentence (what a batch pads to)

A table holds one row per sentence, in input order: the tokenizer's ``input_ids`` / ``attention_mask`` (and
``token_type_ids`` where the tokenizer makes them), unpadded and truncated at ``max_length``, plus ``length``.

With a ``cache_dir`` the table goes through ``datasets`` (``Dataset.from_dict`` + ``map`` with the tokenizer) into
``<cache_dir>/<key>.arrow``, the key being a sha256 of the tokenizer's vocabulary and rules, ``max_length`` and the
sentences. Every epoch, resumed run, comparison seed and search trial that tokenizes the same sentences then
memory-maps that file (~20 ms for STS-B + SICK-R train) instead of tokenizing again (~2 s per 30k sentences on 2
cores), and a large NLI table is read from disk row by row rather than held tokenized in RAM. Without a
``cache_dir`` (serving, one-off calls) the table is a plain dict of lists: ``datasets`` costs ~5 ms a call, more
than tokenizing a request's two sentences.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from stsreg.infra.hashing import sha256_lines

#: The rows of a table: the tokenizer's columns (``length`` is for batching, not for the encoder).
LENGTH = "length"


def tokenizer_fingerprint(tokenizer) -> str:
    """sha256 of what decides a tokenizer's ids: its class, vocabulary and rules, special tokens.

    A fast tokenizer's JSON minus its ``truncation`` / ``padding`` state (a call with ``truncation=True`` sets them,
    so the same tokenizer would otherwise hash differently before and after its first call)."""
    h = hashlib.sha256(type(tokenizer).__name__.encode())
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        spec = json.loads(backend.to_str())
        spec.pop("truncation", None)
        spec.pop("padding", None)
        h.update(json.dumps(spec, sort_keys=True).encode())
    else:  # a slow (Python) tokenizer: its vocabulary and special tokens
        h.update(json.dumps(sorted(tokenizer.get_vocab().items())).encode())
    h.update(json.dumps(tokenizer.special_tokens_map, sort_keys=True, default=str).encode())
    return h.hexdigest()


def table_key(tokenizer, max_length: int, sentences: list[str]) -> str:
    """The cache key of ``sentences`` tokenized by ``tokenizer`` at ``max_length`` (32 hex digits)."""
    parts = f"{tokenizer_fingerprint(tokenizer)}|{max_length}|{sha256_lines(sentences)}"
    return hashlib.sha256(parts.encode()).hexdigest()[:32]


def _tokenize(tokenizer, sentences: list[str], max_length: int) -> dict[str, list]:
    out = dict(tokenizer(list(sentences), truncation=True, max_length=max_length))
    out[LENGTH] = [len(ids) for ids in out["input_ids"]]
    return out


def token_table(sentences: list[str], tokenizer, max_length: int, cache_dir: Path | None = None):
    """(n,) sentences -> their table (see the module docstring): a memory-mapped ``datasets.Dataset`` read from or
    written to ``cache_dir``, or, without one, a dict of (n,) lists."""
    if cache_dir is None:
        return _tokenize(tokenizer, sentences, max_length)
    from datasets import Dataset

    cache_dir = Path(cache_dir)
    cache_dir.mkdir(parents=True, exist_ok=True)
    key = table_key(tokenizer, max_length, sentences)
    path = cache_dir / f"{key}.arrow"
    if path.exists():
        return Dataset.from_file(str(path))
    # map writes to a temporary file beside `path` and moves it in at the end: a killed run leaves no half table
    return Dataset.from_dict({"text": list(sentences)}).map(
        lambda batch: _tokenize(tokenizer, batch["text"], max_length), batched=True, batch_size=1000,
        remove_columns=["text"], cache_file_name=str(path), new_fingerprint=key, desc="tokenize")


def rows(table, idx: list[int]) -> dict[str, list[list[int]]]:
    """Rows ``idx`` of a table, in that order, as the tokenizer's columns (what ``tokenizer.pad`` takes)."""
    if isinstance(table, dict):
        return {k: [v[i] for i in idx] for k, v in table.items() if k != LENGTH}
    picked = table[list(idx)]
    picked.pop(LENGTH)
    return picked


def lengths(table) -> list[int]:
    """Tokens of each sentence of a table, in order."""
    return list(table[LENGTH])


#: Characters read per token of the maximum length when a request's text is cut before tokenizing (a token of a
#: subword vocabulary covers a few characters; 32 leaves a wide margin and bounds a 5 MB string's work).
CHARS_PER_TOKEN = 32


def request_table(sentences: list[str], tokenizer, max_length: int) -> tuple[dict[str, list], list[int]]:
    """A request's (n,) sentences -> (their table as :func:`token_table` makes it without a cache, the indices of
    the sentences cut at ``max_length`` tokens). Each text is read up to ``max_length * CHARS_PER_TOKEN`` characters,
    so one huge string costs what a long sentence does."""
    limit = max_length * CHARS_PER_TOKEN
    texts = [t[:limit] for t in sentences]
    out = dict(tokenizer(texts, truncation=False, verbose=False))
    cut = [i for i, ids in enumerate(out["input_ids"]) if len(ids) > max_length or len(sentences[i]) > limit]
    if cut:  # the rare long ones again, truncated as the tokenizer does it (its special tokens kept)
        again = tokenizer([texts[i] for i in cut], truncation=True, max_length=max_length)
        for key, column in out.items():
            for j, i in enumerate(cut):
                column[i] = again[key][j]
    out[LENGTH] = [len(ids) for ids in out["input_ids"]]
    return out, cut


def concat(tables: list[dict[str, list]]) -> dict[str, list]:
    """Tables (dicts of lists, as :func:`request_table` makes them) one after the other, as one table."""
    return {k: [x for t in tables for x in t[k]] for k in tables[0]}


def take(table: dict[str, list], idx) -> dict[str, list]:
    """Rows ``idx`` of a dict table, its ``length`` column kept."""
    return {k: [v[i] for i in idx] for k, v in table.items()}

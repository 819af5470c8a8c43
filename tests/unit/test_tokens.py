"""Token tables (stsreg.product.tokens): cached ids equal fresh ones, the cache is hit by the same input only, and a
model encodes and pads identically with and without the cache."""

from __future__ import annotations

import torch

from stsreg.product import tokens
from stsreg.product.model import SiameseRegressor
from tests.conftest import tiny_sts


def _sentences(n: int = 40) -> list[str]:
    pairs = tiny_sts(n, seed=3)
    return pairs.sentence1.tolist() + pairs.sentence2.tolist()


def test_cached_table_holds_the_tokenizers_ids_and_is_reused(tiny_backbone, tmp_path):
    tok = SiameseRegressor.from_pretrained(tiny_backbone).tokenizer
    s = _sentences()
    fresh = tok(s, truncation=True, max_length=6)
    table = tokens.token_table(s, tok, 6, tmp_path)
    files = sorted(tmp_path.glob("*.arrow"))
    assert len(files) == 1
    idx = [5, 0, 17, 79]
    got = tokens.rows(table, idx)
    assert set(got) == set(fresh.keys())
    for k in got:
        assert got[k] == [fresh[k][i] for i in idx]
    assert tokens.lengths(table) == [len(ids) for ids in fresh["input_ids"]]
    assert max(tokens.lengths(table)) == 6  # truncated at max_length

    mtime = files[0].stat().st_mtime_ns
    again = tokens.token_table(s, tok, 6, tmp_path)  # same tokenizer, length, sentences: read, not rewritten
    assert sorted(tmp_path.glob("*.arrow")) == files and files[0].stat().st_mtime_ns == mtime
    assert tokens.rows(again, idx) == got
    # the in-memory table (no cache) gives the same rows
    assert tokens.rows(tokens.token_table(s, tok, 6), idx) == got


def test_key_changes_with_sentences_and_length_not_with_the_tokenizers_call_state(tiny_backbone):
    tok = SiameseRegressor.from_pretrained(tiny_backbone).tokenizer
    s = _sentences()
    before = tokens.table_key(tok, 6, s)
    tok(s, truncation=True, max_length=3)  # sets the fast tokenizer's truncation state
    assert tokens.table_key(tok, 6, s) == before
    assert tokens.table_key(tok, 7, s) != before
    assert tokens.table_key(tok, 6, s[:-1]) != before
    assert tokens.table_key(tok, 6, s[1:] + s[:1]) != before  # order matters: rows are by position


def test_model_pads_and_encodes_alike_with_and_without_the_cache(tiny_backbone, tmp_path):
    m = SiameseRegressor.from_pretrained(tiny_backbone, max_length=8, precision="fp32").eval()
    s = _sentences()
    plain = m.encode(s, batch_size=16, show_progress=False)
    batch = m.tokenize(s[:16])  # pad-to-longest in one tokenizer call: what training used to do per step
    m.token_cache = tmp_path
    cached = m.encode(s, batch_size=16, show_progress=False)
    assert torch.equal(plain, cached)
    padded = m.collate(m.pretokenize(s), list(range(16)))
    assert set(padded) == set(batch) and all(torch.equal(padded[k], batch[k]) for k in batch)
    assert len(list(tmp_path.glob("*.arrow"))) == 1

"""Stage 1: one encoder pass however many epochs, a warm cache costs no encoder pass, the head learns."""

import torch

from stsreg.config import Stage1Params
from stsreg.model import SiameseRegressor
from stsreg.training.stage1 import train_head
from tests.helpers.nli import tiny_nli





def test_one_encoder_pass_cache_and_learning(tiny_backbone, tmp_path):
    torch.manual_seed(0)
    # fp32: `auto` would add its two small probe passes (tests/unit/test_precision.py) to the count below
    model = SiameseRegressor.from_pretrained(tiny_backbone, max_length=16, precision="fp32")
    calls = []
    model.encoder.register_forward_hook(lambda *a: calls.append(1))
    nli = tiny_nli(300)
    distinct = len(set(nli.premise) | set(nli.hypothesis))
    p = Stage1Params(epochs=3, batch_size=16, lr=1e-2, encode_batch_size=32)
    before = model.encoder.state_dict()["embeddings.word_embeddings.weight"].clone()
    first = train_head(model, nli, p, seed=0, cache_dir=tmp_path / "cache")
    assert len(calls) == -(-distinct // 32)          # one pass over the distinct sentences, not one per epoch
    assert not first["cache_hit"] and first["steps"] == 3 * -(-300 // 16)
    assert torch.equal(before, model.encoder.state_dict()["embeddings.word_embeddings.weight"])  # encoder frozen
    calls.clear()
    second = train_head(model, nli, p, seed=0, cache_dir=tmp_path / "cache")
    assert second["cache_hit"] and calls == []       # warm cache: no encoder pass at all
    assert second["head_rounded_accuracy"] > 0.34    # better than one class out of three

"""Reduced precision: the mode resolves as documented, the auto probe refuses drifting embeddings, bf16 encoding
stays close to fp32, and bf16 training keeps fp32 weights and still learns."""

import json

import pytest
import torch
import torch.nn.functional as F

from stsreg.product import precision
from stsreg.infra.config import Stage2Params
from stsreg.product.model import SiameseRegressor
from tests.helpers.training import fine_tune_params as fine_tune
from tests.conftest import tiny_sts

CPU = torch.device("cpu")


def test_fixed_modes_and_bad_mode():
    assert precision.resolve("fp32", CPU) is None
    assert precision.resolve("bf16", CPU) is torch.bfloat16
    with pytest.raises(ValueError, match="precision must be one of"):
        precision.resolve("fp16", CPU)
    assert precision.describe(None) == "fp32" and precision.describe(torch.bfloat16) == "bf16"


def test_auto_is_fp32_without_native_bf16_and_never_probes(monkeypatch):
    monkeypatch.setattr(precision, "cpu_flags", lambda: frozenset({"avx2", "avx512f"}))
    assert not precision.native_bf16(CPU)
    # embed=None: a probe would fail loudly, so this also proves none ran
    assert precision.resolve("auto", CPU, embed=None, tokenize=None) is None


def test_auto_refuses_bf16_when_the_probe_shows_drift(monkeypatch, caplog):
    monkeypatch.setattr(precision, "cpu_flags", lambda: frozenset({"avx512_bf16"}))
    torch.manual_seed(0)
    ref = torch.randn(len(precision.PROBE_SENTENCES), 8)

    def embed(features):  # exact in fp32, unrelated vectors under bf16 autocast
        return torch.randn_like(ref) if torch.is_autocast_enabled("cpu") else ref

    tokenize = lambda xs: {"input_ids": torch.zeros(len(xs), 3, dtype=torch.long)}  # noqa: E731
    assert precision.resolve("auto", CPU, embed, tokenize) is None
    assert "drift" in caplog.text
    assert precision.resolve("auto", CPU, lambda f: ref, tokenize) is torch.bfloat16  # no drift: bf16


def test_bf16_encoding_stays_close_to_fp32(tiny_backbone):
    sentences = tiny_sts(40).sentence1.tolist()
    fp32 = SiameseRegressor.from_pretrained(tiny_backbone, max_length=16, precision="fp32")
    bf16 = SiameseRegressor.from_pretrained(tiny_backbone, max_length=16, precision="bf16")
    bf16.load_state_dict(fp32.state_dict())
    assert fp32.amp_dtype is None and bf16.amp_dtype is torch.bfloat16
    a, b = fp32.encode(sentences), bf16.encode(sentences)
    assert a.dtype == b.dtype == torch.float32 and not torch.equal(a, b)  # bf16 really ran
    assert F.cosine_similarity(a, b).min() > 0.99


def test_bf16_training_keeps_fp32_weights_and_learns(tiny_backbone, tmp_path):
    torch.manual_seed(0)
    model = SiameseRegressor.from_pretrained(tiny_backbone, max_length=16, precision="bf16")
    p = Stage2Params(loss="cosine_mse", batch_size=8, epochs=2, eval_every=10, checkpoint_every_s=3600, lr=1e-3,
                     warmup_ratio=0.1)
    summary = fine_tune(model, tiny_sts(200), tiny_sts(60, seed=1), p, seed=3, out_dir=tmp_path / "out",
                        ckpt_dir=tmp_path / "ckpt", device=CPU)
    assert summary["precision"] == "bf16"
    assert all(t.dtype == torch.float32 for t in model.state_dict().values() if t.is_floating_point())
    curve = dict((int(s), v) for s, v in summary["dev_curve"])
    assert summary["best_dev_spearman"] > curve[0] + 5
    # precision is a setting of the run (params.yaml's model.precision, passed by the runner), not of the weights:
    # the saved folder does not record it, and a folder that did (saved before) cannot contradict the caller
    card = tmp_path / "out" / "stsreg_model.json"
    assert "precision" not in json.loads(card.read_text())
    card.write_text(json.dumps({**json.loads(card.read_text()), "precision": "bf16"}))
    assert SiameseRegressor.load(tmp_path / "out", precision="fp32").amp_dtype is None
    assert SiameseRegressor.load(tmp_path / "out", precision="bf16").amp_dtype is torch.bfloat16


def test_cached_runs_are_keyed_by_the_precision_auto_resolves_to(monkeypatch, tmp_path):
    # a bf16 run is never reused by an fp32 one, and `auto` is keyed by what it resolves to on this machine
    import dataclasses

    from stsreg.experiments import compare
    from stsreg.infra.config import Params
    from stsreg.product import precision as prec

    nli = tmp_path / "nli.parquet"
    nli.write_bytes(b"table")

    def keys(mode: str) -> tuple[str, str]:
        p = Params()
        p = dataclasses.replace(p, model=dataclasses.replace(p.model, precision=mode))
        return compare.run_key(p, "ours", 42, "sts", "nli").fingerprint, compare.stage1_key(p, nli)

    monkeypatch.setattr(prec, "native_bf16", lambda device: True)
    assert prec.cache_name("auto") == "bf16"
    auto_on_bf16 = keys("auto")
    monkeypatch.setattr(prec, "native_bf16", lambda device: False)
    assert prec.cache_name("auto") == "fp32"
    auto_on_fp32 = keys("auto")
    assert auto_on_bf16[0] != auto_on_fp32[0] and auto_on_bf16[1] != auto_on_fp32[1]
    assert keys("fp32") != keys("bf16")

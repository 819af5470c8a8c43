"""``serve.backend: auto`` chooses by load: the backend whose worse slowdown, alone (a quiet server) or in full
batches (a busy one), is the smallest, and says why at ``GET /metadata``."""

from stsreg.product.serving.export import explain, pick, slowdowns

#: What registration measured on an EPYC with AVX-512 + bf16 (2 cores): torch ahead in batches by 1.16x, 3.5x slower
#: alone. Judging batches only chose torch there, and every request at low load paid 9.2 ms for 2.6.
ZEN4_BF16 = {"torch": {"sentences_s": 828.0, "batch1_p50_ms": 9.2},
             "onnx-int8": {"sentences_s": 711.0, "batch1_p50_ms": 2.6}}


def test_a_backend_far_slower_alone_loses_to_one_a_little_slower_in_batches():
    assert slowdowns(ZEN4_BF16)["torch"] == (9.2 / 2.6, 1.0)
    assert pick(ZEN4_BF16) == "onnx-int8"


def test_a_backend_far_ahead_in_batches_wins_when_it_is_nearly_as_fast_alone():
    rates = {"torch": {"sentences_s": 2000.0, "batch1_p50_ms": 3.0},  # a GPU-like torch: 2.9x int8's throughput
             "onnx-int8": {"sentences_s": 700.0, "batch1_p50_ms": 2.6}}
    assert pick(rates) == "torch"


def test_the_choice_does_not_depend_on_the_order_measured():
    rates = {"onnx": {"sentences_s": 205.0, "batch1_p50_ms": 11.0}, "onnx-int8": {"sentences_s": 205.0,
                                                                                  "batch1_p50_ms": 11.0}}
    assert pick(rates) == pick(dict(reversed(list(rates.items())))) == "onnx"


def test_the_explanation_names_the_choice_the_rule_and_every_measurement():
    why = explain("onnx-int8", ZEN4_BF16)
    assert why.startswith("onnx-int8: ") and "worse slowdown" in why and "whatever the load" in why
    assert "torch 9.2 ms alone (3.54x the best), 828 sentences/s in batches (1.00x)" in why
    assert "onnx-int8 2.6 ms alone (1.00x the best), 711 sentences/s in batches (1.16x)" in why
    assert explain("torch", {}).startswith("torch: a GPU is here")

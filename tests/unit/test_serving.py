"""The serving path without a server: what a request may be (every 4xx names the field and row), and dynamic batching
(concurrent requests merged into fewer encoder calls, each caller given its own rows in order, equal to encoding
alone)."""

import asyncio
import json

import numpy as np
import pytest

from stsreg.product.serving import protocol
from stsreg.product.serving.batcher import MicroBatcher
from stsreg.product.serving.protocol import RequestError


def _inv(payload, ctype="application/json", max_rows=100):
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return protocol.parse_invocations(body, ctype, max_rows)


def test_every_mlflow_request_form_parses_to_the_same_pairs():
    pairs = [("a man plays", "a man is playing"), ("dogs run", "cats sleep")]
    forms = [{"dataframe_records": [{"sentence1": a, "sentence2": b} for a, b in pairs]},
             {"dataframe_split": {"columns": ["sentence1", "sentence2"], "data": [list(p) for p in pairs]}},
             {"inputs": {"sentence1": [a for a, _ in pairs], "sentence2": [b for _, b in pairs]}},
             {"instances": [{"sentence1": a, "sentence2": b} for a, b in pairs]}]
    for form in forms:
        parsed = _inv(form)
        assert parsed.kind == "pairs" and list(zip(parsed.first, parsed.second)) == pairs, form
    csv_body = b"sentence1,sentence2\n" + b"".join(f'"{a}","{b}"\n'.encode() for a, b in pairs)
    assert list(zip(*(lambda p: (p.first, p.second))(_inv(csv_body, "text/csv")))) == pairs
    sentences = _inv({"dataframe_records": [{"sentence": "one"}, {"sentence": "two"}]})
    assert sentences.kind == "sentences" and sentences.first == ["one", "two"]


@pytest.mark.parametrize("payload,status,says", [
    ({"dataframe_records": []}, 400, "dataframe_records is empty"),
    ({"dataframe_records": [{"sentence1": "a", "sentence2": None}]}, 400, "dataframe_records[0].sentence2 must hold "
                                                                          "non-empty strings; got null"),
    ({"dataframe_records": [{"sentence1": "a", "sentence2": "b"}, {"sentence1": "c"}]}, 400, "dataframe_records[1]: "
                                                                                             "missing column(s) "
                                                                                             "['sentence2']"),
    ({"dataframe_records": [{"sentence1": 3, "sentence2": "b"}]}, 400, "dataframe_records[0].sentence1 must hold "
                                                                       "non-empty strings; got int"),
    ({"dataframe_records": [{"sentence1": " ", "sentence2": "b"}]}, 400, "got an empty one"),
    ({"dataframe_records": [{"sentence": "a", "sentence1": "b", "sentence2": "c"}]}, 400, "not both"),
    ({"dataframe_records": 5}, 400, "dataframe_records must be a list of row objects"),
    ({"dataframe_records": [5]}, 400, "dataframe_records[0] must be an object"),
    ({"dataframe_split": {"columns": ["sentence1", "sentence2"], "data": [["a"]]}}, 400, "dataframe_split.data[0] must "
                                                                                         "be a list of 2 values"),
    ({"rows": []}, 400, "exactly one of"),
    (42, 400, "exactly one of"),
    (b"{", 400, "not valid JSON"),
    (b"", 400, "empty body"),
    (b'{"dataframe_records": [{"sentence1": "\xff", "sentence2": "b"}]}', 400, "not valid UTF-8"),
    ({"dataframe_records": [{"sentence1": "a", "sentence2": "b"}] * 101}, 400, "the limit is 100"),
])
def test_each_malformed_request_is_a_4xx_naming_the_field_and_row(payload, status, says):
    with pytest.raises(RequestError) as err:
        _inv(payload)
    assert err.value.status == status and says in err.value.message
    body = json.loads(err.value.body())
    assert set(body) == {"error_code", "message"} and "Traceback" not in body["message"] and "/" not in body["message"]


def test_the_openai_and_similarity_bodies():
    texts, options = protocol.parse_embeddings(b'{"input": "hello", "model": "m"}', 10)
    assert texts == ["hello"] and options == {"model": "m", "encoding_format": "float", "dimensions": None}
    assert protocol.parse_embeddings(b'{"input": ["a", "b"], "encoding_format": "base64"}', 10)[0] == ["a", "b"]
    for bad, says in ((b'{"input": []}', "non-empty list"), (b'{"input": [[1, 2]]}', "input[0] must hold"),
                      (b'{"input": "a", "encoding_format": "int8"}', "encoding_format"), (b'{"text": "a"}', "'input'")):
        with pytest.raises(RequestError, match=".*") as err:
            protocol.parse_embeddings(bad, 10)
        assert says in err.value.message
    pairs = protocol.parse_similarity(b'{"sentence1": ["a", "b"], "sentence2": ["c", "d"]}', 10)
    assert pairs.first == ["a", "b"] and pairs.second == ["c", "d"]
    with pytest.raises(RequestError, match="one length"):
        protocol.parse_similarity(b'{"sentence1": ["a", "b"], "sentence2": ["c"]}', 10)


class _Counted:
    """The real tiny encoder, counting its calls and the sentences of each."""

    def __init__(self, model):
        self.model, self.calls = model, []

    def encode(self, sentences):
        self.calls.append(len(sentences))
        return self.model.encode(sentences, 64, show_progress=False).float().numpy()


def test_concurrent_requests_are_batched_and_each_gets_its_own_rows_in_order(tiny_backbone):
    from stsreg.product.model import SiameseRegressor

    model = SiameseRegressor.from_pretrained(tiny_backbone, max_length=16).eval()
    counted = _Counted(model)
    requests = [[f"request {i} sentence {j} {'long ' * (i % 5)}" for j in range(1 + i % 4)] for i in range(40)]
    requests[7] = requests[3]  # two callers with the same sentences: encoded once, both answered

    async def main():
        batcher = MicroBatcher(lambda: counted, max_sentences=64, max_wait_s=0.02)
        answers = await asyncio.gather(*(batcher.embed(r) for r in requests))
        batcher.close()
        return answers

    answers = asyncio.run(main())
    assert len(counted.calls) < len(requests) / 4 and max(counted.calls) <= 64 + 4  # merged, within the budget
    for sentences, (vectors, served) in zip(requests, answers):
        alone = model.encode(sentences, 64, show_progress=False).float().numpy()
        assert served is counted and vectors.shape == alone.shape
        np.testing.assert_allclose(vectors, alone, atol=1e-5)  # padding to a longer batch changes nothing


def test_a_failing_batch_fails_its_callers_and_the_batcher_keeps_serving(tiny_backbone):
    class Flaky:
        def __init__(self):
            self.fail = True

        def encode(self, sentences):
            if self.fail:
                self.fail = False
                raise RuntimeError("out of memory")
            return np.ones((len(sentences), 3), np.float32)

    flaky = Flaky()

    async def main():
        batcher = MicroBatcher(lambda: flaky, max_wait_s=0.0)
        with pytest.raises(RuntimeError, match="out of memory"):
            await batcher.embed(["a"])
        vectors, _ = await batcher.embed(["b", "c"])
        batcher.close()
        return vectors

    assert asyncio.run(main()).shape == (2, 3)


def test_one_requests_bad_input_fails_that_request_only():
    """A batch the encoder refuses because of one request's sentence: the others in it are answered."""
    class Picky:
        calls = 0

        def encode(self, sentences):
            Picky.calls += 1
            if any(s.startswith("bad") for s in sentences):
                raise TypeError("TextEncodeInput must be Union[TextInputSequence, ...]")
            return np.array([[float(len(s)), 1.0] for s in sentences], np.float32)

    async def main():
        batcher = MicroBatcher(lambda: Picky(), max_sentences=64, max_wait_s=0.05)
        answers = await asyncio.gather(*(batcher.embed([f"good {i}", f"also good {i}"]) for i in range(5)),
                                       batcher.embed(["bad one"]), return_exceptions=True)
        batcher.close()
        return answers

    answers = asyncio.run(main())
    assert isinstance(answers[5], TypeError)
    for i, (vectors, _) in enumerate(answers[:5]):
        np.testing.assert_array_equal(vectors[:, 0], [len(f"good {i}"), len(f"also good {i}")])


def test_a_lone_surrogate_is_refused_for_its_field_before_the_encoder():
    with pytest.raises(protocol.RequestError, match=r"input\[1\] is not valid Unicode: surrogates not allowed"):
        protocol.parse_embeddings(b'{"input": ["fine", "\\ud800"]}', 10)
    with pytest.raises(protocol.RequestError, match=r"dataframe_records\[0\].sentence2 is not valid Unicode"):
        protocol.parse_invocations(b'{"dataframe_records": [{"sentence1": "a", "sentence2": "x\\udfff"}]}',
                                   "application/json", 10)

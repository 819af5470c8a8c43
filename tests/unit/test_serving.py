"""The serving path without a server: what a request may be (every 4xx names the field and row). The batcher's own
tests are in test_batcher.py."""

import asyncio
import json

import numpy as np
import pytest

from stsreg.product.serving import protocol
from stsreg.product.serving.protocol import RequestError

JSON = "application/json"


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
    texts, options = protocol.parse_embeddings(b'{"input": "hello", "model": "m"}', JSON, 10)
    assert texts == ["hello"] and options == {"model": "m", "encoding_format": "float", "dimensions": None}
    assert protocol.parse_embeddings(b'{"input": ["a", "b"], "encoding_format": "base64"}', JSON, 10)[0] == ["a", "b"]
    for bad, says in ((b'{"input": []}', "non-empty list"), (b'{"input": [[1, 2]]}', "input[0] must hold"),
                      (b'{"input": "a", "encoding_format": "int8"}', "encoding_format"), (b'{"text": "a"}', "'input'"),
                      (b'{"input": "a", "model": 5}', "model must be a string"),
                      (b'{"input": "a", "dimensions": "8"}', "dimensions must be an integer")):
        with pytest.raises(RequestError, match=".*") as err:
            protocol.parse_embeddings(bad, JSON, 10)
        assert says in err.value.message
    pairs = protocol.parse_similarity(b'{"sentence1": ["a", "b"], "sentence2": ["c", "d"]}', JSON, 10)
    assert pairs.first == ["a", "b"] and pairs.second == ["c", "d"]
    with pytest.raises(RequestError, match="one length"):
        protocol.parse_similarity(b'{"sentence1": ["a", "b"], "sentence2": ["c"]}', JSON, 10)


def test_a_lone_surrogate_is_refused_for_its_field_before_the_encoder():
    with pytest.raises(protocol.RequestError, match=r"input\[1\] is not valid Unicode: surrogates not allowed"):
        protocol.parse_embeddings(b'{"input": ["fine", "\\ud800"]}', JSON, 10)
    with pytest.raises(protocol.RequestError, match=r"dataframe_records\[0\].sentence2 is not valid Unicode"):
        protocol.parse_invocations(b'{"dataframe_records": [{"sentence1": "a", "sentence2": "x\\udfff"}]}',
                                   "application/json", 10)


def test_a_json_endpoint_refuses_another_content_type():
    for parse in (protocol.parse_embeddings, protocol.parse_similarity):
        with pytest.raises(RequestError) as err:
            parse(b'{"input": "a", "sentence1": "a", "sentence2": "b"}', "text/plain", 10)
        assert err.value.status == 415 and "application/json" in err.value.message

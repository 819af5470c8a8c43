"""The server's machine-readable contract: ``GET /openapi.json`` (OpenAPI 3.1) and ``GET /docs`` (the same as a page
that needs nothing from the network). Every endpoint, request form and error shape of
:mod:`stsreg.product.serving.app` is described here; ``tests/unit/test_serving_app.py`` (a toy model) and
``tests/flows/test_release_flow.py`` (a registered one) run schemathesis ``--checks all``
against a live server with it (no 5xx; every status, header and body as described; a valid body accepted, an invalid
one refused; an undescribed method a 405 with ``Allow``, :func:`allowed`). A client can be generated from it
(``openapi-python-client``, ``openapi-generator``), as for TEI's and Infinity's.
"""

from __future__ import annotations

import html
import json

_TEXT = {"type": "string", "minLength": 1, "pattern": r"\S", "description": "text; not blank"}
_TEXTS = {"type": "array", "items": _TEXT, "minItems": 1}
_PAIR = {"type": "object", "required": ["sentence1", "sentence2"],
         "properties": {"sentence1": _TEXT, "sentence2": _TEXT}}
_SENTENCE = {"type": "object", "required": ["sentence"], "properties": {"sentence": _TEXT}}
_ROWS = {"oneOf": [{"type": "array", "items": _PAIR, "minItems": 1}, {"type": "array", "items": _SENTENCE,
                                                                       "minItems": 1}]}
_COLUMNS = {"oneOf": [{"type": "object", "required": ["sentence1", "sentence2"], "additionalProperties": False,
                       "properties": {"sentence1": _TEXTS, "sentence2": _TEXTS}},
                      {"type": "object", "required": ["sentence"], "additionalProperties": False,
                       "properties": {"sentence": _TEXTS}}]}
_NUMBERS = {"type": "array", "items": {"type": "number"}}
_ERROR = {"type": "object", "required": ["error_code", "message"],
          "properties": {"error_code": {"type": "string"}, "message": {"type": "string"}}}
_REFUSALS = {"400": "the body is not what this endpoint takes (the message names the field and row)",
             "408": "the body did not arrive within serve.request_timeout_s",
             "413": "the body, a request's tokens or (serve.truncate false) a text is over its limit",
             "415": "a Content-Type this endpoint does not take", "429": "the queue is full: retry after Retry-After",
             "503": "the model is loading, or the server is stopping"}


def _json(schema: dict) -> dict:
    return {"application/json": {"schema": schema}}


def _answers(ok: dict, description: str) -> dict:
    out = {"200": {"description": description, "content": _json(ok),
                   "headers": {"X-Truncated": {"description": "texts cut at the model's maximum length (sent when "
                                                              "any was)", "schema": {"type": "string"}}}}}
    for status, why in _REFUSALS.items():
        out[status] = {"description": why, "content": _json({"$ref": "#/components/schemas/Error"})}
    out["429"]["headers"] = {"Retry-After": {"description": "seconds", "schema": {"type": "string"}}}
    return out


def _post(summary: str, body: dict, ok: dict, description: str) -> dict:
    return {"post": {"summary": summary, "requestBody": {"required": True, "content": body},
                     "responses": _answers(ok, description)}}


def _get(summary: str, content: dict, extra: dict | None = None) -> dict:
    return {"get": {"summary": summary, "responses": {"200": {"description": "ok", "content": content},
                                                        **(extra or {})}}}


_INVOCATIONS = {"oneOf": [
    {"type": "object", "required": ["dataframe_records"], "additionalProperties": False,
     "properties": {"dataframe_records": _ROWS}},
    {"type": "object", "required": ["dataframe_split"], "additionalProperties": False,
     "properties": {"dataframe_split": {"type": "object", "required": ["columns", "data"], "properties": {
         "columns": {"const": ["sentence1", "sentence2"]},
         "data": {"type": "array", "minItems": 1, "items": {"type": "array", "prefixItems": [_TEXT, _TEXT],
                                                            "minItems": 2, "maxItems": 2}}}}}},
    {"type": "object", "required": ["inputs"], "additionalProperties": False,
     "properties": {"inputs": {"oneOf": [_ROWS, _COLUMNS]}}},
    {"type": "object", "required": ["instances"], "additionalProperties": False,
     "properties": {"instances": {"oneOf": [_ROWS, _COLUMNS]}}}]}
_SCORED = {"type": "object", "required": ["cosine", "score"],
           "properties": {"cosine": {"type": "number"}, "score": {"type": "number"}}}
_EMBEDDED = {"type": "object", "required": ["embedding"], "properties": {"embedding": _NUMBERS}}
_PREDICTIONS = {"type": "object", "required": ["predictions"],
                "properties": {"predictions": {"type": "array", "items": {"oneOf": [_SCORED, _EMBEDDED]}}}}
_EMBEDDINGS_IN = {"type": "object", "required": ["input"], "properties": {
    "input": {"oneOf": [_TEXT, _TEXTS]}, "model": {"type": ["string", "null"]},
    "encoding_format": {"enum": ["float", "base64", None]},
    "dimensions": {"type": ["integer", "null"], "description": "the model's own dimension (it does not shorten "
                                                               "embeddings); /openapi.json names it once loaded"},
    "user": {"type": ["string", "null"]}}}
_EMBEDDINGS_OUT = {"type": "object", "required": ["object", "model", "data", "usage"], "properties": {
    "object": {"const": "list"}, "model": {"type": "string"},
    "data": {"type": "array", "items": {"type": "object", "required": ["object", "index", "embedding"], "properties": {
        "object": {"const": "embedding"}, "index": {"type": "integer"},
        "embedding": {"oneOf": [_NUMBERS, {"type": "string", "description": "base64 of little-endian float32"}]}}}},
    "usage": {"type": "object", "required": ["prompt_tokens", "total_tokens", "truncated"], "properties": {
        "prompt_tokens": {"type": "integer"}, "total_tokens": {"type": "integer"},
        "truncated": {"type": "integer", "description": "inputs cut at the model's maximum length"}}}}}
#: Two strings (one pair), a string and a list (the string against each), or two lists of one length (pairs in order).
_SIMILARITY_IN = {"type": "object", "required": ["sentence1", "sentence2"], "properties": {
    "sentence1": {"oneOf": [_TEXT, _TEXTS]}, "sentence2": {"oneOf": [_TEXT, _TEXTS]}},
    "description": "two lists must be of one length (a 400 says so otherwise)"}
#: A CSV body as ``/invocations`` reads it: a header of the pair or sentence columns, then at least one row, each
#: field not blank (unquoted, or quoted with "" for a quote).
_FIELD = r'(?:[^",\r\n]*[^\s",][^",\r\n]*|"(?:[^"]|"")*[^\s"](?:[^"]|"")*")'
_CSV = {"type": "string", "pattern": rf"^(?:sentence1,sentence2(?:\r?\n{_FIELD},{_FIELD})+|sentence(?:\r?\n{_FIELD})+)"
                                     r"\r?\n?$"}
_SIMILARITY_OUT = {"type": "object", "required": ["cosine", "score", "scale"],
                   "properties": {"cosine": _NUMBERS, "score": _NUMBERS, "scale": _NUMBERS}}
_STATUS = _json({"type": "object", "required": ["status"], "properties": {"status": {"const": "ok"}}})
_READY = {"type": "object", "required": ["ready"], "properties": {"ready": {"type": "boolean"},
                                                                    "version": {"type": ["string", "null"]}}}

SPEC = {
    "openapi": "3.1.0",
    "info": {"title": "stsreg serve", "version": "1",
             "description": "A registered sentence-similarity model: MLflow's scoring protocol, OpenAI's embeddings "
                            "API and pair similarity, every request through one token-budget batcher."},
    "paths": {
        "/invocations": _post("MLflow's scoring protocol: pairs -> cosine and score; sentences -> embeddings",
                              {**_json(_INVOCATIONS), "text/csv": {"schema": _CSV}}, _PREDICTIONS,
                              "one prediction per row, in order"),
        "/v1/embeddings": _post("OpenAI's embeddings API", _json(_EMBEDDINGS_IN), _EMBEDDINGS_OUT,
                                "one embedding per input, in order"),
        "/similarity": _post("pairs -> cosine and the score on the served scale", _json(_SIMILARITY_IN),
                             _SIMILARITY_OUT, "one cosine and score per pair"),
        "/health": _get("the process answers", _STATUS),
        "/ping": _get("the process answers", _STATUS),
        "/ready": _get("200 once a model is loaded and has answered", _json(_READY),
                       {"503": {"description": "loading", "content": _json(_READY)}}),
        "/metadata": _get("what is served: version, backend, precision, device, max length, scale",
                          _json({"type": "object"})),
        "/metrics": _get("Prometheus' text format", {"text/plain": {"schema": {"type": "string"}}}),
        "/version": _get("MLflow's version", _json({"type": "object", "properties": {"mlflow": {"type": "string"}}})),
        "/openapi.json": _get("this description", _json({"type": "object"})),
        "/docs": _get("this description as a page", {"text/html": {"schema": {"type": "string"}}}),
    },
    "components": {"schemas": {"Error": _ERROR}},
}


def dimension_of(served) -> int | None:
    """The served model's embedding dimension (one short text encoded), for :func:`spec`'s ``dimensions``."""
    try:
        table, _ = served.tokenize(["dimension"])
        return int(served.encode_tokens(table).shape[1])
    except Exception:  # noqa: BLE001 (the description then leaves dimensions open; requests say the rest)
        return None


def allowed(path: str) -> tuple[str, ...] | None:
    """The methods ``path`` answers (uppercase), as described; None for a path this server does not have."""
    ops = SPEC["paths"].get(path)
    return tuple(m.upper() for m in ops) if ops else None


def spec(dimension: int | None = None) -> dict:
    """The description; with the served model's ``dimension``, ``dimensions`` says the one value it takes."""
    if dimension is None:
        return SPEC
    out = json.loads(json.dumps(SPEC))
    body = out["paths"]["/v1/embeddings"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    body["properties"]["dimensions"] = {"enum": [dimension, None], "description": "the model's own dimension: it "
                                                                                  "does not shorten embeddings"}
    return out


def _spec(dimension: int | None = None) -> tuple[bytes, bytes]:
    return json.dumps(spec(dimension)).encode(), b"application/json"


def _page(dimension: int | None = None) -> tuple[bytes, bytes]:
    """Each operation with its summary, statuses and schemas, as plain HTML (no script, no CDN: offline hosts)."""
    parts = [f"<h1>{html.escape(SPEC['info']['title'])}</h1><p>{html.escape(SPEC['info']['description'])}</p>",
             '<p>Machine-readable: <a href="/openapi.json">/openapi.json</a> (OpenAPI 3.1).</p>']
    for path, ops in SPEC["paths"].items():
        for method, op in ops.items():
            statuses = ", ".join(f"{s} {html.escape(r['description'])}" for s, r in op["responses"].items())
            body = op.get("requestBody", {}).get("content", {})
            parts.append(f"<h2>{method.upper()} {path}</h2><p>{html.escape(op['summary'])}</p><p>{statuses}</p>"
                         + "".join(f"<details><summary>request {html.escape(t)}</summary><pre>"
                                   f"{html.escape(json.dumps(c['schema'], indent=1))}</pre></details>"
                                   for t, c in body.items()))
    page = "<!doctype html><meta charset=utf-8><title>stsreg serve API</title>" + "".join(parts)
    return page.encode(), b"text/html; charset=utf-8"


#: GET path -> (the served model's dimension or None) -> (body, content type).
PAGES = {"/openapi.json": _spec, "/docs": _page}

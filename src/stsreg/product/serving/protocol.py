"""What a request may be, parsed without pandas or MLflow's schema machinery, and the one error shape.

``/invocations`` (MLflow's scoring protocol, what ``mlflow models serve`` answers): a JSON object with exactly one of
``dataframe_records`` (a list of row objects), ``dataframe_split`` (``{columns, data}``), ``inputs`` / ``instances``
(a list of row objects, or an object of column lists), or a CSV body (``text/csv``, a header row). Rows are pairs
(``sentence1``, ``sentence2``) or single sentences (``sentence``), never both. ``/v1/embeddings``: OpenAI's body
(``input``: a string or a list of strings; ``user`` a string). ``/similarity``: ``{"sentence1": ..., "sentence2":
...}``: two strings, a string and a list (the string against each), or two lists of one length. A field the
description (:mod:`.openapi`) does not allow is refused, never ignored.

Every refusal is a :class:`RequestError` (a 4xx status and a message that names the field and the row), answered as
``{"error_code": ..., "message": ...}`` on every endpoint, never a stack trace or a file path.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass

PAIR = ("sentence1", "sentence2")
SENTENCE = "sentence"
CODES = {400: "BAD_REQUEST", 404: "NOT_FOUND", 405: "METHOD_NOT_ALLOWED", 408: "REQUEST_TIMEOUT",
         413: "REQUEST_TOO_LARGE", 415: "UNSUPPORTED_MEDIA_TYPE", 422: "INVALID_PARAMETER_VALUE",
         429: "TOO_MANY_REQUESTS", 500: "INTERNAL_ERROR", 503: "NOT_READY"}


class RequestError(Exception):
    """A request the server refuses: ``status`` (4xx) and a message naming what is wrong and where."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, message

    def body(self) -> bytes:
        return error_body(self.status, self.message)


def error_body(status: int, message: str) -> bytes:
    return json.dumps({"error_code": CODES.get(status, "BAD_REQUEST"), "message": message}).encode()


@dataclass(frozen=True)
class Parsed:
    """``kind`` pairs: ``first``/``second`` the two sentences of each row; sentences: ``first`` only."""

    kind: str  # "pairs" | "sentences"
    first: list[str]
    second: list[str] | None = None

    def __len__(self) -> int:
        return len(self.first)


def _json(body: bytes):
    if not body.strip():
        raise RequestError(400, "empty body: send a JSON object")
    try:
        return json.loads(body)
    except UnicodeDecodeError:
        raise RequestError(400, "the body is not valid UTF-8") from None
    except (json.JSONDecodeError, RecursionError) as exc:
        raise RequestError(400, f"the body is not valid JSON: {exc}") from None


def _text(value, where: str) -> str:
    if not isinstance(value, str):
        got = "null" if value is None else type(value).__name__
        raise RequestError(400, f"{where} must hold non-empty strings; got {got}")
    if not value.strip():
        raise RequestError(400, f"{where} must hold non-empty strings; got an empty one")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:  # JSON's "\ud800" escape: valid JSON, not text a tokenizer can read
        raise RequestError(400, f"{where} is not valid Unicode: {exc.reason} at character {exc.start}") from None
    return value


def _rows(records, where: str) -> list[dict]:
    if not isinstance(records, list):
        raise RequestError(400, f"{where} must be a list of row objects, got {type(records).__name__}")
    for i, row in enumerate(records):
        if not isinstance(row, dict):
            raise RequestError(400, f"{where}[{i}] must be an object with columns {list(PAIR)} or {SENTENCE!r}")
    return records


def _columns(columns: dict, where: str) -> list[dict]:
    lengths = {k: len(v) for k, v in columns.items() if isinstance(v, list)}
    if len(lengths) != len(columns) or len(set(lengths.values())) > 1:
        raise RequestError(400, f"{where}: every column must be a list, all of one length (got {lengths})")
    n = next(iter(lengths.values()), 0)
    return [{k: v[i] for k, v in columns.items()} for i in range(n)]


def from_rows(rows: list[dict], where: str, max_rows: int) -> Parsed:
    """Row objects (``None`` for a missing value) -> :class:`Parsed`: pairs (``sentence1``, ``sentence2``) or
    sentences (``sentence``), never both, each a non-empty string, at most ``max_rows`` rows; or :class:`RequestError`
    naming the row and column. The one check of a request's rows, for this server and the MLflow pyfunc alike."""
    if not rows:
        raise RequestError(400, f"{where} is empty: send at least one row")
    if len(rows) > max_rows:
        raise RequestError(400, f"{len(rows)} rows in one request; the limit is {max_rows} (split the batch)")
    present = {k for row in rows for k, v in row.items() if v is not None}
    if SENTENCE in present and present & set(PAIR):
        raise RequestError(400, f"send either columns {list(PAIR)} (pairs) or one column {SENTENCE!r} (embeddings), "
                                "not both")
    if SENTENCE in present:
        return Parsed("sentences", [_text(row.get(SENTENCE), f"{where}[{i}].{SENTENCE}") for i, row in enumerate(rows)])
    for i, row in enumerate(rows):
        missing = [c for c in PAIR if c not in row]
        if missing:
            raise RequestError(400, f"{where}[{i}]: missing column(s) {missing}; send columns {list(PAIR)} (or one "
                                    f"column {SENTENCE!r})")
    first = [_text(row["sentence1"], f"{where}[{i}].sentence1") for i, row in enumerate(rows)]
    second = [_text(row["sentence2"], f"{where}[{i}].sentence2") for i, row in enumerate(rows)]
    return Parsed("pairs", first, second)


def parse_invocations(body: bytes, content_type: str, max_rows: int) -> Parsed:
    """An ``/invocations`` body -> :class:`Parsed` (at most ``max_rows`` rows), or :class:`RequestError`."""
    if "csv" in content_type:
        try:
            reader = csv.DictReader(io.StringIO(body.decode("utf-8")), strict=True)
            rows = [dict(r) for r in reader]
        except (UnicodeDecodeError, csv.Error) as exc:
            raise RequestError(400, f"the CSV body cannot be read: {exc}") from None
        return from_rows(rows, "csv rows", max_rows)
    if "json" not in content_type:
        raise RequestError(415, f"unsupported Content-Type {content_type!r}; send application/json (or text/csv)")
    data = _json(body)
    keys = ("dataframe_records", "dataframe_split", "inputs", "instances")
    given = [k for k in keys if isinstance(data, dict) and k in data]
    if len(given) != 1:
        raise RequestError(400, f"the body must be a JSON object with exactly one of {list(keys)}"
                                + (f"; got {given}" if given else ""))
    others = [k for k in data if k not in keys]
    if others:  # as described (additionalProperties: false): a misspelt option is said, never silently ignored
        raise RequestError(400, f"unknown field(s) {others[:5]}; the body holds exactly one of {list(keys)}")
    key = given[0]
    value = data[key]
    if key == "dataframe_split":
        if not isinstance(value, dict) or not isinstance(value.get("columns"),
                                                         list) or not isinstance(value.get("data"), list):
            raise RequestError(400, "dataframe_split must be an object with lists 'columns' and 'data'")
        columns = value["columns"]
        for i, row in enumerate(value["data"]):
            if not isinstance(row, list) or len(row) != len(columns):
                raise RequestError(400, f"dataframe_split.data[{i}] must be a list of {len(columns)} values")
        rows = [dict(zip(columns, row)) for row in value["data"]]
    elif isinstance(value, dict):
        rows = _columns(value, key)
    else:
        rows = _rows(value, key)
    return from_rows(rows, key, max_rows)


def _json_only(content_type: str) -> None:
    if "json" not in content_type:
        raise RequestError(415, f"unsupported Content-Type {content_type!r}; send application/json")


def parse_embeddings(body: bytes, content_type: str, max_rows: int) -> tuple[list[str], dict]:
    """OpenAI's ``/v1/embeddings`` body -> (the input strings, the options: model, encoding_format, dimensions)."""
    _json_only(content_type)
    data = _json(body)
    if not isinstance(data, dict) or "input" not in data:
        raise RequestError(400, "the body must be a JSON object with 'input' (a string or a list of strings)")
    raw = data["input"]
    texts = [raw] if isinstance(raw, str) else raw
    if not isinstance(texts, list) or not texts:
        raise RequestError(400, "input must be a string or a non-empty list of strings (token arrays are not taken)")
    if len(texts) > max_rows:
        raise RequestError(400, f"{len(texts)} inputs in one request; the limit is {max_rows} (split the batch)")
    texts = [_text(t, f"input[{i}]") for i, t in enumerate(texts)]
    fmt = "float" if data.get("encoding_format") is None else data["encoding_format"]
    if fmt not in ("float", "base64"):
        raise RequestError(400, f"encoding_format must be 'float' or 'base64', got {fmt!r}")
    if data.get("model") is not None and not isinstance(data["model"], str):
        raise RequestError(400, f"model must be a string, got {type(data['model']).__name__}")
    if data.get("user") is not None and not isinstance(data["user"], str):
        raise RequestError(400, f"user must be a string, got {type(data['user']).__name__}")
    dims = data.get("dimensions")
    if dims is not None and (isinstance(dims, bool) or not isinstance(dims, int)):
        raise RequestError(400, f"dimensions must be an integer, got {type(dims).__name__}")
    return texts, {"model": data.get("model"), "encoding_format": fmt, "dimensions": data.get("dimensions")}


def parse_similarity(body: bytes, content_type: str, max_rows: int) -> Parsed:
    """``/similarity``: ``{"sentence1": str | [str], "sentence2": str | [str]}`` -> pairs: two strings (one pair), a
    string and a list (the string against each of the list, e.g. a query against its candidates), or two lists of one
    length (pairs in order)."""
    _json_only(content_type)
    data = _json(body)
    if not isinstance(data, dict) or not all(c in data for c in PAIR):
        raise RequestError(400, f"the body must be a JSON object with {list(PAIR)} (strings or lists of strings)")
    one, two = (data[c] for c in PAIR)
    if isinstance(one, str) and isinstance(two, list):
        one = [one] * len(two)
    elif isinstance(two, str) and isinstance(one, list):
        two = [two] * len(one)
    one, two = ([x] if isinstance(x, str) else x for x in (one, two))
    if not isinstance(one, list) or not isinstance(two, list) or len(one) != len(two):
        raise RequestError(400, "sentence1 and sentence2 must be strings or lists of strings, two lists of one "
                                "length")
    return from_rows([{"sentence1": a, "sentence2": b} for a, b in zip(one, two)], "pairs", max_rows)

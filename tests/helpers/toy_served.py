"""Toy served models for the request path's tests: tokens are words, vectors are checkable numbers, and each step
can be made to fail or to wait (stsreg.product.serving.batcher's protocol: tokenize / encode_tokens; the app's: info,
scale, pair_scores)."""

import threading
import time

import numpy as np
import requests

from stsreg.product import tokens


class Words:
    """A served model whose tokens are words (max_length 8) and whose vector of a sentence is (its words, its first
    word's length): each caller's rows can be checked. ``fail_tokenise`` / ``fail_encode``: texts that break that
    step; ``short``: give one vector too few (a scatter that cannot match)."""

    max_length = 8

    def __init__(self, fail_tokenise=(), fail_encode=(), short=False, delay=0.0, tokenize_s_per_text=0.0,
                 s_per_square_token=0.0, max_length=None):
        self.fail_tokenise, self.fail_encode, self.short, self.delay = fail_tokenise, fail_encode, short, delay
        self.tokenize_s_per_text = tokenize_s_per_text  # a tokenizer's cost: long texts take real time
        # an encoder whose text of n tokens costs s_per_square_token * n * n seconds (attention): a long text's token
        # is dearer than a short one's
        self.s_per_square_token = s_per_square_token
        self.max_length = max_length or self.max_length
        self.calls: list[int] = []  # tokens per encoder call
        self.tokenized: list[int] = []  # texts per tokenizer call
        self.gate = threading.Event()  # cleared: the encoder holds its batch until it is set
        self.gate.set()

    def tokenize(self, sentences):
        time.sleep(self.tokenize_s_per_text * len(sentences))
        self.tokenized.append(len(sentences))
        if any(s in self.fail_tokenise for s in sentences):
            raise ValueError("the tokenizer broke")
        ids = [list(range(len(s.split())))[:self.max_length] for s in sentences]
        cut = [i for i, s in enumerate(sentences) if len(s.split()) > self.max_length]
        table = {"input_ids": ids, "text": list(sentences), tokens.LENGTH: [len(x) for x in ids]}
        return table, cut

    def encode_tokens(self, table):
        time.sleep(self.delay + self.s_per_square_token * sum(n * n for n in table[tokens.LENGTH]))
        self.gate.wait(10)
        if any(t in self.fail_encode for t in table["text"]):
            raise TypeError("TextEncodeInput must be Union[TextInputSequence, ...]")
        self.calls.append(sum(table[tokens.LENGTH]))
        out = np.array([[n, len(t.split()[0])] for n, t in zip(table[tokens.LENGTH], table["text"])], np.float32)
        return out[:-1] if self.short and len(out) > 1 else out


class ToyServed(Words):
    """Words as a served version: what the app reads of one (info, scale, pair scores)."""

    inner, scale = True, (0.0, 5.0)
    info = {"model_uri": "models:/toy/1", "version": "1", "backend": "toy"}

    def pair_scores(self, u, v):
        cosine = (u * v).sum(1) / np.linalg.norm(u, axis=1) / np.linalg.norm(v, axis=1)
        return cosine.astype(float), (cosine * 5).astype(float)


def guarded_on_loopback(app, drain_s: float = 30.0):
    """(url, the uvicorn server, its thread): ``app`` behind the request guard (1 MiB bodies, depth 32, 2 s to send a
    body) on a free loopback port, answering ``/health``."""
    import uvicorn

    from stsreg.product.serving.serve import RequestGuard
    from tests.conftest import free_port

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(RequestGuard(app, 1 << 20, 32, timeout_s=2.0), host="127.0.0.1",
                                           port=port, log_level="warning", timeout_graceful_shutdown=drain_s))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    for _ in range(100):
        try:
            requests.get(url + "/health", timeout=1)
            break
        except requests.ConnectionError:
            time.sleep(0.05)
    return url, server, thread

"""The request path's batcher (stsreg.product.serving.batcher.TokenBatcher) without a server: continuous batching on
a token budget, large requests split and reassembled, backpressure (429 / 413), callers that leave, and a consumer
that cannot die: a failure injected at each step (tokenise, encode, scatter) fails only the requests it belongs to,
and the next request is served."""

import asyncio

import numpy as np
import pytest

from stsreg.product.serving.batcher import TokenBatcher
from stsreg.product.serving.refusals import Overloaded, TooLarge
from stsreg.product.serving.server_config import Admission
from tests.helpers.toy_served import Words


def _expected(sentences):
    return np.array([[min(len(s.split()), 8), len(s.split()[0])] for s in sentences], np.float32)


def _run(model, calls, **settings):
    async def main():
        batcher = TokenBatcher(lambda: model, Admission(**settings))
        try:
            return await calls(batcher)
        finally:
            batcher.close()

    return asyncio.run(main())


def test_concurrent_requests_share_calls_within_the_token_budget_and_get_their_rows_in_order():
    model = Words(delay=0.01)
    requests = [[f"w{i} " + "x " * (j % 6) for j in range(1 + i % 4)] for i in range(60)]
    answers = _run(model, lambda b: asyncio.gather(*(b.embed(r) for r in requests)), batch_tokens=24)
    assert len(model.calls) < len(requests) / 2 and max(model.calls) <= 24
    for sentences, answer in zip(requests, answers):
        np.testing.assert_array_equal(answer.vectors, _expected(sentences))
        assert answer.model is model and answer.tokens == sum(min(len(s.split()), 8) for s in sentences)


def test_a_request_larger_than_a_batch_is_split_reassembled_in_order_and_shares_the_encoder():
    model = Words(delay=0.01)
    big = [f"big{i} a b c" for i in range(200)]  # 800 tokens: 34 pieces of 24

    async def calls(b):
        first = asyncio.ensure_future(b.embed(big))
        await asyncio.sleep(0.03)
        small = await b.embed(["a small one"])  # answered while the big one still has pieces queued
        return first, small, first.done()

    first, small, big_done_first = _run(model, calls, batch_tokens=24)
    assert not big_done_first and max(model.calls) <= 24
    np.testing.assert_array_equal(small.vectors, _expected(["a small one"]))
    np.testing.assert_array_equal(_run(model, lambda b: b.embed(big), batch_tokens=24).vectors, _expected(big))


def test_a_full_queue_answers_overloaded_with_a_retry_after_and_a_request_over_the_queue_is_too_large():
    model = Words()
    model.gate.clear()

    async def calls(b):
        busy = [asyncio.ensure_future(b.embed([f"s{i} a b c d"])) for i in range(6)]  # 5 tokens each
        for _ in range(500):  # the encoder holds the first; 25 tokens wait
            if b.queued_tokens == 25 and model.gate is not None:
                break
            await asyncio.sleep(0.01)
        assert b.queued_tokens == 25
        with pytest.raises(Overloaded) as over:
            await b.embed(["one more a b c d"])  # 6 tokens: 31 > 30
        with pytest.raises(TooLarge, match="split the batch"):
            await b.embed(["a b c d e f g h"] * 5)
        model.gate.set()
        await asyncio.gather(*busy)
        return over.value.retry_after, (await b.embed(["after the rush"])).vectors

    retry_after, after = _run(model, calls, batch_tokens=5, max_queued_tokens=30)
    assert retry_after >= 1
    np.testing.assert_array_equal(after, _expected(["after the rush"]))


def test_a_text_over_the_maximum_length_is_cut_and_said_or_refused():
    long = "w " * 20
    answer = _run(Words(), lambda b: b.embed(["short one", long]))
    assert answer.truncated == [1] and answer.vectors[1, 0] == 8
    with pytest.raises(TooLarge, match="maximum length"):
        _run(Words(), lambda b: b.embed(["short one", long]), truncate=False)


def test_a_caller_that_leaves_is_dropped_from_the_queue():
    model = Words(delay=0.1)

    async def calls(b):
        first = asyncio.ensure_future(b.embed(["keeps the encoder busy"]))
        await asyncio.sleep(0.02)
        leaving = asyncio.ensure_future(b.embed([f"left {i} a b" for i in range(50)]))
        await asyncio.sleep(0.02)
        leaving.cancel()
        await asyncio.sleep(0)
        queued = b.queued_tokens
        await first
        return queued, b.metrics.refused.labels("client_gone")._value.get()

    queued, gone = _run(model, calls, batch_tokens=8)
    assert queued == 0 and gone == 1


@pytest.mark.parametrize("step", ["tokenise", "encode", "scatter"])
def test_a_failure_at_any_step_fails_only_its_requests_and_the_next_request_is_served(step):
    model = Words(fail_tokenise=("bad",) if step == "tokenise" else (), fail_encode=("bad",) if step == "encode"
                  else (), short=step == "scatter", delay=0.01)

    async def calls(b):
        good = [[f"good {i}"] for i in range(5)]
        answers = await asyncio.gather(*(b.embed(r) for r in good), b.embed(["bad"]), return_exceptions=True)
        model.short = False
        return good, answers, await asyncio.wait_for(b.embed(["next one"]), 5)

    good, answers, after = _run(model, calls)
    failed = [a for a in answers if isinstance(a, Exception)]
    if step == "scatter":  # every request of the batch whose vectors could not be matched: an error, not a hang
        assert failed and all(isinstance(a, ValueError) for a in failed)
    else:
        assert len(failed) == 1 and isinstance(answers[5], Exception)
        for sentences, answer in zip(good, answers[:5]):
            np.testing.assert_array_equal(answer.vectors, _expected(sentences))
    np.testing.assert_array_equal(after.vectors, _expected(["next one"]))


def test_an_abandoned_large_request_stops_holding_the_tokenizer_and_never_delays_a_small_one():
    """A 20,000-text request whose client left after a moment delayed a small request of another client by 25.9 s:
    it held the tokenizer thread to its end. Tokenized in chunks, the small one goes between them, and the large one
    stops at the next chunk once cancelled."""
    model = Words(tokenize_s_per_text=0.0002)  # 4 s for the large request's 20,000 texts on one thread

    async def calls(batcher):
        large = asyncio.ensure_future(batcher.embed([f"w{i} a b" for i in range(20000)]))
        await asyncio.sleep(0.3)
        started = asyncio.get_running_loop().time()
        small = await batcher.embed(["a man plays"])
        small_s = asyncio.get_running_loop().time() - started
        large.cancel()  # its client has gone
        chunks = len(model.tokenized)
        await asyncio.sleep(0.5)
        return small, small_s, chunks, len(model.tokenized)

    small, small_s, chunks_then, chunks_after = _run(model, calls, batch_tokens=64)
    np.testing.assert_array_equal(small.vectors, _expected(["a man plays"]))
    assert small_s < 0.5, small_s  # one chunk's wait (~0.05 s), not the large request's 4 s
    assert chunks_after - chunks_then <= 1 and sum(model.tokenized) < 20000  # stopped at the next chunk


def test_overload_refuses_at_once_with_a_retry_after_from_the_drain_rate_and_answers_what_it_admits_in_time():
    """200 clients x 64 long texts served nothing: accepted requests never answered within 60 s, a 429 took 22 s to
    arrive and said Retry-After: 734. The queue is bounded in time (answer_within_s at the measured rate): what it
    admits is answered within it, the rest is refused in milliseconds with a retry in seconds."""
    model = Words(delay=0.05)  # 8 tokens per 0.05 s call: 160 tokens/s

    async def calls(batcher):
        await batcher.embed(["a b c d e f g h"])  # the encoder's rate is measured
        loop = asyncio.get_running_loop()

        async def one(i):
            started = loop.time()
            try:
                await batcher.embed([f"w{i} b c d e f g h"] * 4)  # 32 tokens: 0.2 s of encoder
                return "ok", loop.time() - started, None
            except Overloaded as exc:
                return "429", loop.time() - started, exc.retry_after

        return await asyncio.gather(*(one(i) for i in range(60)))  # 12 s of work at once

    answers = _run(model, calls, batch_tokens=8, max_queued_tokens=100000, answer_within_s=1.0)
    served = [s for kind, s, _ in answers if kind == "ok"]
    refused = [(s, retry) for kind, s, retry in answers if kind == "429"]
    assert 2 <= len(served) <= 15 and len(refused) >= 45, (len(served), len(refused))
    assert max(served) < 1.0 + 0.5  # admitted: answered within answer_within_s (and one batch)
    assert max(s for s, _ in refused) < 0.3  # refused at once
    assert all(1 <= retry <= 3 for _, retry in refused), refused  # the queue drains in about answer_within_s


def test_a_request_longer_than_the_time_bound_alone_is_served_when_the_queue_is_empty():
    """A request that alone needs more than answer_within_s of encoder can never meet the bound: it is taken when
    nothing else waits (and shares the encoder round robin with what comes after), never refused for ever."""
    model = Words(delay=0.05)

    async def calls(batcher):
        await batcher.embed(["a b c d e f g h"])
        return await batcher.embed([f"w{i} b c d e f g h" for i in range(40)])  # 320 tokens: ~2 s at 160/s

    answer = _run(model, calls, batch_tokens=8, answer_within_s=1.0)
    assert answer.vectors.shape == (40, 2)

"""What a request will cost the encoder, in seconds, from its texts' token lengths: the batcher admits by it.

A token of a long text costs more than a token of a short one (attention grows with the square of the length, and the
encoder pads a batch to its longest text), so one rate in tokens per second, measured on short pairs, admits floods of
long texts the encoder cannot answer in time. :class:`EncoderCost` keeps seconds per token per length bucket
(powers of two), measured at start on a batch of short and a batch of long texts (:meth:`EncoderCost.calibrate`) and
corrected from every batch the server runs (:meth:`EncoderCost.observe`, a moving average on the bucket that holds
most of the batch's tokens). A bucket not measured yet borrows from the nearest measured one: a longer bucket's rate
as it is (an overestimate for shorter texts), a shorter bucket's scaled up by the length ratio (at most linear growth
per token), so an estimate errs towards refusing rather than towards a request that waits past its bound.
"""

from __future__ import annotations

import bisect
import time
from collections import defaultdict

from stsreg.product import tokens

#: Upper bounds of the length buckets, in tokens (a longer text is in the last).
BUCKETS = (8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
#: The weight of a new batch in a bucket's moving average.
SMOOTHING = 0.2
#: The calibration's texts: a short sentence, and a long one repeated to the model's maximum length.
SHORT_TEXT = "A man is playing a guitar."
LONG_WORDS = "the quick brown fox jumps over the lazy dog while a man plays a guitar in the park "


def bucket(length: int) -> int:
    """The bucket of a text of ``length`` tokens (an index into :data:`BUCKETS`)."""
    return min(bisect.bisect_left(BUCKETS, length), len(BUCKETS) - 1)


def _tokens_by_bucket(lengths) -> dict[int, int]:
    """Bucket -> the tokens of the texts of these ``lengths`` in it."""
    by = defaultdict(int)
    for n in lengths:
        by[bucket(n)] += n
    return by


class EncoderCost:
    """Seconds per token by length bucket; :meth:`seconds` estimates a list of texts' lengths, 0.0 before anything
    was measured (then only the token bound admits)."""

    def __init__(self):
        self.per_token: dict[int, float] = {}

    @property
    def measured(self) -> bool:
        return bool(self.per_token)

    def rate(self, b: int) -> float:
        """Seconds per token of bucket ``b``: its own, else the nearest measured bucket's (see the module)."""
        if b in self.per_token:
            return self.per_token[b]
        if not self.per_token:
            return 0.0
        longer = [k for k in self.per_token if k > b]
        if longer:
            return self.per_token[min(longer)]
        below = max(self.per_token)
        return self.per_token[below] * BUCKETS[b] / BUCKETS[below]

    def text_seconds(self, length: int) -> float:
        """The encoder seconds of one text of ``length`` tokens."""
        return length * self.rate(bucket(length))

    def seconds(self, lengths) -> float:
        """The encoder seconds of texts of these token ``lengths``."""
        return sum(tokens * self.rate(b) for b, tokens in _tokens_by_bucket(lengths).items())

    def observe(self, lengths, seconds: float) -> None:
        """A batch of texts of these ``lengths`` took ``seconds``: the bucket holding most of its tokens moves towards
        what it cost (the other buckets' share taken out at their own rates)."""
        by = _tokens_by_bucket(lengths)
        if not by or seconds <= 0:
            return
        main = max(by, key=by.get)
        others = sum(tokens * self.rate(b) for b, tokens in by.items() if b != main) if self.per_token else 0.0
        now = max(seconds - others, seconds * by[main] / sum(by.values())) / by[main]
        old = self.per_token.get(main)
        self.per_token[main] = now if old is None else (1 - SMOOTHING) * old + SMOOTHING * now

    def calibrate(self, model, max_length: int) -> None:
        """Measure the short and the long bucket on ``model`` (``tokenize`` / ``encode_tokens``): 16 short texts, then
        2 texts at ``max_length`` tokens, each encoded twice (the first warms up) and the second timed."""
        long_text = LONG_WORDS * max(1, max_length // 8)
        for texts in ([SHORT_TEXT] * 16, [long_text] * 2):
            table, _ = model.tokenize(texts)
            model.encode_tokens(table)
            started = time.perf_counter()
            model.encode_tokens(table)
            self.per_token.pop(bucket(max(table[tokens.LENGTH])), None)  # a timed run replaces the guess
            self.observe(table[tokens.LENGTH], time.perf_counter() - started)

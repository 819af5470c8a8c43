"""Tiny NLI tables for tests: premises with an entailment, a neutral and a contradiction hypothesis each."""

import pandas as pd
import torch

from tests.conftest import TINY_WORDS


def grouped_nli(premises: int, seed: int = 0) -> pd.DataFrame:
    """(premise, hypothesis, label) with 3 rows per premise: label 2 (entailment: the premise's first 4 words),
    1 (neutral: 3 of them + 'sad slow'), 0 (contradiction: 'blue car drives fast'). Labels 0/1/2 as prepared."""
    g = torch.Generator().manual_seed(seed)
    rows = []
    for _ in range(premises):
        words = [TINY_WORDS[j] for j in torch.randint(len(TINY_WORDS), (6,), generator=g)]
        premise = " ".join(words)
        rows += [{"premise": premise, "hypothesis": " ".join(words[:4]), "label": 2},
                 {"premise": premise, "hypothesis": " ".join(words[:3] + ["sad", "slow"]), "label": 1},
                 {"premise": premise, "hypothesis": "blue car drives fast", "label": 0}]
    return pd.DataFrame(rows)


def tiny_nli(n: int) -> pd.DataFrame:
    """``n`` (premise, hypothesis, label) rows with distinct random premises; label i % 3."""
    g = torch.Generator().manual_seed(0)
    rows = []
    for i in range(n):
        words = [TINY_WORDS[j] for j in torch.randint(len(TINY_WORDS), (5,), generator=g)]
        label = i % 3
        hyp = words if label == 2 else (words[:3] + ["sad", "slow"] if label == 1
                                        else ["blue", "car", "drives", "fast"])
        rows.append({"premise": " ".join(words), "hypothesis": " ".join(hyp), "label": label})
    return pd.DataFrame(rows)

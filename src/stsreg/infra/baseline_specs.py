"""The systems of the baselines study (``stsreg baselines``), declared once: each one's family, the study's row and
figure it stands for, what it trains and the ``baselines`` settings it reads. Params' choices and default
(``baselines.systems``), each row's key (the settings it reads), the table's families and study figures derive from
:data:`SYSTEMS`; :mod:`stsreg.experiments.baselines.experiment` runs each family.
"""

from __future__ import annotations

from dataclasses import dataclass

# The settings of the ``baselines`` section each kind of system reads (``experiment.settings`` reads them).
_WORD2VEC = ("word_dim", "word_window", "word_epochs", "word_min_count")
_GLOVE = ("word_dim", "glove_window", "glove_epochs", "word_min_count")
_RNN_FIT = ("max_train_pairs", "rnn_epochs", "rnn_lr", "rnn_batch_size")
_RNN = ("rnn_dim", "rnn_hidden", *_RNN_FIT)
_INFERSENT = ("infersent_hidden", "infersent_nli_pairs", "infersent_nli_epochs", "infersent_lr", *_RNN_FIT)
_TRANSFORMER = ("backbone", "max_length", "max_train_pairs", "epochs", "batch_size", "lr", "warmup_ratio", "eval_every",
                "precision")
_SLLM = (*_TRANSFORMER, "projection_dim")
_LORA = (*_SLLM, "lora_r", "lora_alpha", "lora_lr")


@dataclass(frozen=True)
class System:
    """A system of the study: ``family`` (word vectors | recurrent | bi-encoder | cross-encoder) decides how it is
    built and trained; ``reads`` are the only settings its run's key holds."""

    family: str
    study_row: str               # the study's row(s) this system stands for
    study_spearman: str          # the study's STS-B Spearman (fractions), "" when the study has no figure
    trained: str                 # what is trained, in words
    reads: tuple[str, ...]       # the ``baselines`` settings it reads: its run's key holds these and no others
    uses_nli: bool = False


#: Every system, in the order of the study's table. ``study_spearman`` is the study's figure as printed.
SYSTEMS: dict[str, System] = {
    "word2vec_pretrained": System("word vectors", "Word2Vec (pretrained)", "0.325", "nothing: mean of word vectors, "
                                                                                    "cosine",
                                  ("word2vec_path",)),
    "glove_pretrained": System("word vectors", "GloVe (pretrained)", "0.274", "nothing: mean of word vectors, cosine",
                               ()),
    "word2vec_skipgram": System("word vectors", "Word2Vec skip-gram (self-trained)", "0.475",
                                "word vectors (gensim skip-gram); mean, cosine", _WORD2VEC, uses_nli=True),
    "word2vec_cbow": System("word vectors", "Word2Vec CBOW (self-trained)", "0.259",
                            "word vectors (gensim CBOW); mean, cosine", _WORD2VEC, uses_nli=True),
    "glove_selftrained": System("word vectors", "GloVe (self-trained)", "0.239",
                                "word vectors (GloVe objective, torch); mean, cosine", _GLOVE, uses_nli=True),
    "rnn": System("recurrent", "RNN", "0.216", "embeddings + RNN, cosine MSE", _RNN, uses_nli=True),
    "lstm": System("recurrent", "LSTM", "0.352", "embeddings + LSTM, cosine MSE", _RNN, uses_nli=True),
    "lstm_glove": System("recurrent", "LSTM (pretrained embeddings)", "0.688", "LSTM on frozen GloVe, cosine MSE",
                         ("rnn_hidden", *_RNN_FIT)),
    "gru": System("recurrent", "GRU", "0.529", "embeddings + GRU, cosine MSE", _RNN, uses_nli=True),
    "infersent": System("recurrent", "InferSent", "0.785", "BiLSTM-max on frozen GloVe: NLI, then cosine MSE",
                        _INFERSENT, uses_nli=True),
    "cls_projection": System("bi-encoder", "BERT / ALBERT / RoBERTa", "0.898 / 0.885 / 0.912",
                             "encoder + CLS d x d projection, cosine MSE", _TRANSFORMER),
    "cross_linear": System("cross-encoder", "cross-encoder sigmoid(W z) (described, no figure)", "",
                           "encoder + sigmoid(W z) on the pair's CLS, MSE", _TRANSFORMER),
    "cross_mlp": System("cross-encoder", "BERT / ALBERT / RoBERTa (MLP+sigmoid)", "0.896 / 0.858 / 0.915",
                        "encoder + MLP(512) + sigmoid on the pair's CLS, MSE", _TRANSFORMER),
    "sbert": System("bi-encoder", "S-BERT", "0.868", "encoder, mean pooling, cosine MSE", _TRANSFORMER),
    "sllm_full": System("bi-encoder", "S-LLM full fine-tuning", "0.869", "encoder + GeLU projection, cosine MSE",
                        _SLLM),
    "sllm_lora": System("bi-encoder", "S-LLM LoRA", "0.903", "LoRA adapters + GeLU projection, cosine MSE", _LORA),
}
#: The systems in the order of the study's table: params' choices and the default of ``baselines.systems``.
BASELINE_SYSTEMS = tuple(SYSTEMS)

"""The comparative study's systems on STS-B, as one more experiment (``stsreg baselines``).

Modules: :mod:`~stsreg.experiments.baselines.scoring` (what a system is: a pair scorer, a bi-encoder),
:mod:`~stsreg.experiments.baselines.fit` (how every system trains: MSE on label / 5, selection on STS-B dev),
:mod:`~stsreg.experiments.baselines.wordvec` (averaged word vectors: pretrained GloVe, word2vec files, self-trained
word2vec and GloVe), :mod:`~stsreg.experiments.baselines.recurrent` (RNN / LSTM / GRU, InferSent BiLSTM-max),
:mod:`~stsreg.experiments.baselines.encoders` (transformer bi-encoders, cross-encoders, LoRA) and
:mod:`~stsreg.experiments.baselines.experiment` (the catalogue of systems, one run, the report).
"""

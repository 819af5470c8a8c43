"""The two training stages of the regression framework and the parts of stage 2's loop.

- :mod:`~stsreg.training.stage1`: the ``Linear(3d, 1)`` head on cached NLI embeddings (encoder frozen);
- :mod:`~stsreg.training.stage2`: the whole model on STS pairs (the loop);
- :mod:`~stsreg.training.batches`: random or length-grouped batches, label handling;
- :mod:`~stsreg.training.selection`: STS-B dev evaluation and the kept model;
- :mod:`~stsreg.training.checkpoint`: the resumable checkpoint.
"""

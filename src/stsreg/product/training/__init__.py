"""The two training stages of the regression framework and the parts of stage 2's loop.

- :mod:`~stsreg.product.training.stage1_training`: the ``Linear(3d, 1)`` head on cached NLI embeddings (encoder frozen);
- :mod:`~stsreg.product.training.stage2_training`: the whole model on STS pairs (the loop);
- :mod:`~stsreg.product.training.batches`: random or length-grouped batches, label handling;
- :mod:`~stsreg.product.training.selection`: STS-B dev evaluation and the kept model;
- :mod:`~stsreg.product.training.checkpoint`: the resumable checkpoint.
"""

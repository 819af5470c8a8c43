"""Memory and step-time profile of training methods (the paper's Table 4), one configuration per subprocess.

- :mod:`~stsreg.experiments.profiling.measure`: one measurement in a fresh process (``python -m
stsreg.experiments.profiling.measure``);
- :mod:`~stsreg.experiments.profiling.costmodel`: ``c0 + c1·B·L + c2·B·L²`` fitted on the measured points (leave-one-out
error);
- :mod:`~stsreg.experiments.profiling.grid`: the grid, cheapest first, with budget-based skipping and the headline
ratio;
- :mod:`~stsreg.experiments.profiling.profile_table`: table, frame and plot.
"""

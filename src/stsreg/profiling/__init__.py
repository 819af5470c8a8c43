"""Memory and step-time profile of training methods (the paper's Table 4), one configuration per subprocess.

- :mod:`~stsreg.profiling.measure`: one measurement in a fresh process (``python -m stsreg.profiling.measure``);
- :mod:`~stsreg.profiling.costmodel`: ``c0 + c1·B·L + c2·B·L²`` fitted on the measured points (leave-one-out error);
- :mod:`~stsreg.profiling.grid`: the grid, cheapest first, with budget-based skipping and the headline ratio;
- :mod:`~stsreg.profiling.report`: table, frame and plot.
"""

"""Explorations (docs/explorations.md, docs/comparison.md): each module reads and writes ``reports/explore/<name>/``
relative to the project root and reports test figures for description only; every choice reads STS-B dev.

- ``cos_scale``: Smooth K2 on the cosine with narrower bands ``|a*cos + b - label|`` (3 seeds), reports and production
check
- ``soup_train`` / ``soup``: weight mixes of two cosine-map fine-tunes along STS-B dev; ``wise_ft``: stage 1 -> stage 2
- ``fitted_map``: a cosine map refitted to each batch by least squares
- ``stage1_start``: the comparison's start (each seed's stage-1 model) scored like a row
- ``subset_breakdown``: a row's STS12-16 difference split into within-subset and between-subset parts
- ``gpu_3epochs``: stage-2 runs in parallel processes on one GPU (the job runner behind reports/explore/gpu_3epochs)
"""

"""The product pipeline's Prefect flows (data, stage 1, stage 2, release, scheduled operation and its deployments,
stage 2 on a GPU work pool). They import :mod:`stsreg.product` and :mod:`stsreg.infra`, never the experiments."""

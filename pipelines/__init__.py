"""Prefect flows: orchestration only. Each task calls one `stsreg` function and passes paths along."""

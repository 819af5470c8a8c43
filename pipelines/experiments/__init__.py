"""The paper's experiments as Prefect flows: the comparison, the NLI table, the baselines, the search, the profile."""

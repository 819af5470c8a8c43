"""Data layer: source registry and fetch, raw-format readers, pandera schemas, prepare, leakage."""

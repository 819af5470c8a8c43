"""Benchmarks of this project against sentence-transformers (``make bench``); not part of the library."""

"""Benchmarks behind `octobrain bench`: BEIR datasets and metrics, SciFact, LoCoMo, scale,
cold start, and the README tables they write."""

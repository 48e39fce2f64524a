"""Benchmarks behind `just bench-*`: timings printed as medians of repeated runs."""

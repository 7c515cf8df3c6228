"""Benchmarks and workloads (tgs-bench)."""

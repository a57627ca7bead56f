"""Metric sources: the exposition parser and the vLLM / LMCache / Prometheus readers."""

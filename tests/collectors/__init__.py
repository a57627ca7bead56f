"""Collector tests (a package so `collectors.nvml_stub` imports under --import-mode=importlib)."""

"""kvops: operations toolkit for vLLM KV-cache offloading."""

__version__ = "0.1.0"

"""Hardware and host collectors: one vendor or source per module.

Each collector has a `name` (the `collector` label: "nvidia", "amd", "host"), a `collect()`
that returns its part of a Snapshot or raises, and `close()`: kvops.snapshot.Collector.
registry.py lists them by name.
The runner wraps every call in its own error boundary and deadline, so a raising collector
costs only its own series.
"""

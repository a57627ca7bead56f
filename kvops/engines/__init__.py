"""Engines kvops reads: one module per engine, each mapping its /metrics page onto the
snapshot's tier model (docs/tiers.md)."""

"""Connections: the HTTP client that fetches /metrics pages, concurrent fetching, addresses,
and target discovery through the Kubernetes API. Knows nothing of what a page means."""

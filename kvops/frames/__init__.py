"""Where `kvops top` gets its frames besides live scrapes: a recorded page (replay) and a
Prometheus server (the fleet view), and the decoding of a kvops exporter's own page."""

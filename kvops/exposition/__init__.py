"""The Prometheus text exposition: the parser (parser.py) and histograms read from its samples.
Knows no engine: engines/ say which names matter."""

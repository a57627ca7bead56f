"""One scrape round: the targets (target.py) and the collectors run concurrently by the
runner (runner.py) into a Snapshot; page_filter.py asks a target for the wanted families only."""

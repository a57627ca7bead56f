"""Judging: the playbook catalog, the log scan for its signatures, the rules and the findings
with their fixed commands (diagnose)."""

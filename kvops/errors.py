"""Errors that end a command with a one-line message and exit code 2 (bad input)."""


class UsageError(Exception):
    """Bad input from the user: a flag, a file, a URL. cli.main prints it on one line, exit 2."""

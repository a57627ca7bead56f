"""Errors that end a command with a one-line message and exit code 2 (bad input)."""


class UsageError(Exception):
    """Bad input from the user: a flag, a file, a URL. cli.main prints it on one line, exit 2."""


def one_line(reason: object, limit: int = 300, typed: bool = False) -> str:
    """An error's first line of text, at most `limit` characters: what logs, metrics and
    status lines show. Its type's name when it has no text; `typed` puts the name first."""
    text = str(reason).strip()
    if not text:
        return type(reason).__name__
    first = text.splitlines()[0][:limit]
    return f"{type(reason).__name__}: {first}" if typed else first

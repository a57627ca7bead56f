"""Shell words with where each one is written: the pasted text can then be changed in one place
and every other byte given back as the user wrote it.

A POSIX-shell subset, enough for what people paste as "the command": blanks separate words;
'...' is literal (newlines included: a multi-line single-quoted JSON is one word, as shlex reads
it); "..." with \\" \\\\ \\$ \\` escapes; a backslash outside quotes escapes the next character;
backslash-newline joins lines; $(...) and `...` stay inside their word; an unquoted newline, ;,
&&, ||, |, & end a command; redirections are their own operators; # starts a comment at a word's
start. A line that starts with `-` after a line that lost its `\\` continues the command.
"""

from __future__ import annotations

from kvops.errors import UsageError

OPERATORS = (
    "&&",
    "||",
    ";;",
    "|&",
    ">>",
    "&>>",
    "&>",
    ">&",
    "<&",
    "<<<",
    "<<",
    "<>",
    ">|",
    ";",
    "|",
    "&",
    "(",
    ")",
    "<",
    ">",
)
_SORTED_OPS = sorted(OPERATORS, key=len, reverse=True)
_OP_CHARS = set(";&|()<>")


class Word(str):
    """A word as the shell passes it (quotes removed), and the [start, end) it is written at."""

    start: int
    end: int
    op: bool  # an unquoted operator (a newline that ends a command reads as ";")
    quoted: bool  # written with quotes or escapes: `'...'` is a value, `...` an elision

    def __new__(cls, text: str, start: int, end: int, op: bool = False, quoted: bool = False) -> Word:
        word = super().__new__(cls, text)
        word.start, word.end, word.op, word.quoted = start, end, op, quoted
        return word


def split(text: str, newline_ends_command: bool = True) -> list[Word]:
    """Every word and operator of `text`, in order. UsageError when a quote is never closed."""
    out: list[Word] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch in " \t\r":
            i += 1
            continue
        if ch == "\\" and text.startswith("\n", i + 1):  # a continuation: not a separator
            i += 2
            continue
        if ch == "\n":
            rest = text[i + 1 :].lstrip(" \t")
            if newline_ends_command and not rest.startswith("-"):
                out.append(Word(";", i, i + 1, op=True))
            i += 1
            continue
        if ch == "#":  # a comment runs to the end of the line
            j = text.find("\n", i)
            i = n if j < 0 else j
            continue
        if ch in _OP_CHARS:
            op = next((o for o in _SORTED_OPS if text.startswith(o, i)), ch)
            out.append(Word(op, i, i + len(op), op=True))
            i += len(op)
            continue
        start, value = i, []
        while i < n:
            ch = text[i]
            if ch in " \t\r\n" or ch in _OP_CHARS:
                break
            if ch == "\\":
                if text.startswith("\n", i + 1):
                    i += 2
                    continue
                if i + 1 < n:
                    value.append(text[i + 1])
                i += 2
                continue
            if ch == "'":
                j = text.find("'", i + 1)
                if j < 0:
                    raise UsageError("cannot split --cmd as a shell line: No closing quotation")
                value.append(text[i + 1 : j])
                i = j + 1
                continue
            if ch == '"':
                i = _double_quoted(text, i + 1, value)
                continue
            if ch == "`" or text.startswith("$(", i):
                j = _substitution_end(text, i)
                value.append(text[i:j])
                i = j
                continue
            value.append(ch)
            i += 1
        word = "".join(value)
        if word.isdigit() and text[start:i] == word and i < n and text[i] in "<>":
            continue  # `2>&1`: a file descriptor number, part of the redirection
        out.append(Word(word, start, i, quoted=text[start:i] != word))
    return out


def _double_quoted(text: str, i: int, value: list[str]) -> int:
    while i < len(text):
        ch = text[i]
        if ch == '"':
            return i + 1
        if ch == "\\" and i + 1 < len(text) and text[i + 1] in '"\\$`\n':
            if text[i + 1] != "\n":
                value.append(text[i + 1])
            i += 2
            continue
        value.append(ch)
        i += 1
    raise UsageError("cannot split --cmd as a shell line: No closing quotation")


def _substitution_end(text: str, i: int) -> int:
    """Past the end of `...` or $(...) (nested parentheses counted)."""
    if text[i] == "`":
        j = text.find("`", i + 1)
        return len(text) if j < 0 else j + 1
    depth, j = 0, i + 1
    while j < len(text):
        if text[j] == "(":
            depth += 1
        elif text[j] == ")":
            depth -= 1
            if depth == 0:
                return j + 1
        j += 1
    return len(text)

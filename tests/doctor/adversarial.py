"""Adversarial lines for a regex, built from the regex itself: every prefix of each top-level
alternative, turned into a short text that matches that prefix, repeated to a whole log line.

A backtracking pattern (`A.*B`, `\\S+\\.x`) re-scans the rest of the line from every place its
head matches; a line made of nothing but its head is its worst case, and grows quadratically.
"""

from __future__ import annotations

from typing import Any

try:  # Python 3.11+
    import re._constants as C
    import re._parser as P
except ImportError:  # Python 3.10
    import sre_constants as C  # type: ignore[no-redef]
    import sre_parse as P  # type: ignore[no-redef]

_CATEGORY = {
    C.CATEGORY_DIGIT: "1",
    C.CATEGORY_SPACE: " ",
    C.CATEGORY_WORD: "w",
    C.CATEGORY_NOT_SPACE: "x",
    C.CATEGORY_NOT_DIGIT: "x",
    C.CATEGORY_NOT_WORD: " ",
}


def _char_of(items: Any) -> str:
    for op, av in items:
        if op is C.LITERAL:
            return chr(av)
        if op is C.RANGE:
            return chr(av[0])
        if op is C.CATEGORY:
            return _CATEGORY.get(av, "x")
    return "x"


def _sample(items: Any, branch: int) -> str:
    """A short text matching `items` (the `branch`-th alternative of each group where it has one)."""
    out = []
    for op, av in items:
        if op is C.LITERAL:
            out.append(chr(av))
        elif op is C.NOT_LITERAL:
            out.append("y" if av == ord("x") else "x")
        elif op is C.ANY:
            out.append("a")
        elif op is C.IN:
            out.append(_char_of(av))
        elif op in (C.MAX_REPEAT, C.MIN_REPEAT, getattr(C, "POSSESSIVE_REPEAT", None)):
            low, _high, sub = av
            out.append(_sample(sub, branch) * max(low, 1 if branch else low))
        elif op is C.SUBPATTERN:
            out.append(_sample(av[-1], branch))
        elif op is C.BRANCH:
            alternatives = av[1]
            out.append(_sample(alternatives[min(branch, len(alternatives) - 1)], branch))
        elif op is getattr(C, "ATOMIC_GROUP", None):
            out.append(_sample(av, branch))
    return "".join(out)


def _unbounded(item: Any) -> bool:
    """Whether an item repeats without bound anywhere inside it (where backtracking can cost)."""
    op, av = item
    if op in (C.MAX_REPEAT, C.MIN_REPEAT) and av[1] == C.MAXREPEAT:
        return True
    if op is C.SUBPATTERN:
        return any(_unbounded(i) for i in av[-1])
    if op in (C.MAX_REPEAT, C.MIN_REPEAT):
        return any(_unbounded(i) for i in av[2])
    if op is C.BRANCH:
        return any(_unbounded(i) for alt in av[1] for i in alt)
    return False


def heads(pattern: str) -> set[str]:
    """Texts that match a growing head of each alternative of `pattern` (and then stop): the heads
    around each unbounded repeat, and the whole alternative but its last item."""
    items = list(P.parse(pattern))
    if len(items) == 1 and items[0][0] is C.BRANCH:
        alternatives = [list(a) for a in items[0][1][1]]
    else:
        alternatives = [items]
    out: set[str] = set()
    for alt in alternatives:
        cuts = {len(alt) - 1, len(alt)} | {k for k in range(len(alt)) if _unbounded(alt[k])}
        cuts |= {k + 1 for k in range(len(alt)) if _unbounded(alt[k])}
        for branch in (0, 1, 2):
            for k in sorted(c for c in cuts if c >= 1):
                text = _sample(alt[:k], branch)
                if text:
                    out.update((text, text + " "))
    return out


def lines_for(pattern: str, length: int) -> list[str]:
    """One line of `length` characters per head, that head repeated."""
    return [(h * (length // len(h) + 1))[:length] for h in sorted(heads(pattern))]

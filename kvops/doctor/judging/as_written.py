"""A fixed command printed as the user wrote it: only the vLLM serve segment changes.

The pasted text (serve_line.clean's: prompts and colours gone, lines and `\\` continuations kept)
is edited in place: the words of a removed flag are cut together with the blank (or `\\` line
break) before them, a new flag goes after the segment's last word with the separator the user put
between flags, a new env assignment goes before the launch words (`docker run -e` for a
container), a new docker option before the image. Every other byte (`export X=...:$X`, `source
.../activate &&`, `$VAR`, quoting, `| tee log`, the other lines) is given back untouched.

A YAML paste (compose, Kubernetes) is edited the same way where the command is a string scalar
whose characters are found in the text one for one (a `|` or `>` block, a one-line plain or quoted
string; serve_line._scalar_places), and kept only if it reads back as the fixed command.

None when a word to change has no known place (a YAML list item, a script inside quotes written
with escapes) or the edited YAML would not read back: the caller then prints the command rebuilt
from its parts.
"""

from __future__ import annotations

import shlex

from kvops.doctor.reading import serve_line
from kvops.doctor.reading.cmdline import Arg, ServeCommand, arg_tokens, parse
from kvops.doctor.reading.shell_words import Word
from kvops.errors import UsageError


def _placed(words: tuple[str, ...]) -> bool:
    return bool(words) and all(isinstance(w, Word) for w in words)


def _cut_start(text: str, start: int) -> int:
    """Where a removed word's cut begins: the blanks and `\\` line breaks before it go too, and
    the line break before a word that starts its line (a flag on its own line of a pasted command
    or of a YAML `>` block), so that no empty or less indented line is left."""
    j = start
    while True:
        while j > 0 and text[j - 1] in " \t":
            j -= 1
        if j >= 2 and text[j - 2 : j] == "\\\n":
            j -= 2
            continue
        if j >= 1 and text[j - 1] == "\n":
            return j - 1
        return j


def _quoted(token: str) -> str:
    return token if token.startswith("$") and shlex.quote(token[1:]) == token[1:] else shlex.quote(token)


def render(before: ServeCommand, after: ServeCommand) -> str | None:
    """`after` (before.with_fix(...)) written into `before`'s pasted text; None when it cannot be."""
    text = before.pasted
    if text is None:
        return None
    cuts: list[tuple[int, int]] = []
    inserts: list[tuple[int, str]] = []

    kept = {id(a.src[0]) for a in after.args if a.src}
    added = [a for a in after.args if not a.src]
    for a in before.args:
        if a.src and id(a.src[0]) not in kept:
            if not _placed(a.src):
                return None
            cuts.append((_cut_start(text, a.src[0].start), a.src[-1].end))  # type: ignore[attr-defined]
    placed_args = [w for a in before.args for w in a.src]
    anchors = [*before.launch, *placed_args, *(w for w in before.tokens)]
    last = max((w for w in anchors if isinstance(w, Word)), key=lambda w: w.end, default=None)
    if added:
        if last is None:
            return None
        sep = " "
        flags = [a.src[0] for a in before.args if a.src and isinstance(a.src[0], Word)]
        if len(flags) >= 2:  # the user's own separator between flags: ` \` + newline + indent
            gap = text[_cut_start(text, flags[-1].start) : flags[-1].start]
            sep = gap if "\\\n" in gap else " "
        words = [" ".join(arg_tokens(a)) for a in added]  # quoted; a secret as $NAME
        inserts.append((last.end, "".join(sep + w for w in words)))

    # env: a new or changed assignment before the launch words (docker: -e before the image)
    old_env = dict(before.env)
    src = dict(before.env_src)
    after_env = dict(after.env)
    new_env = [(k, v) for k, v in after.env if k not in old_env or old_env[k] != v]
    gone = [k for k in old_env if k not in after_env or after_env[k] != old_env[k]]
    for name in gone:
        env_words = src.get(name, ())
        if not _placed(env_words):
            return None
        cuts.append((_cut_start(text, env_words[0].start), env_words[-1].end))  # type: ignore[attr-defined]

    docker = before.launcher == "docker"
    image = _image_word(before)
    if new_env:
        where = image if docker else (before.launch[0] if before.launch else None)
        if not isinstance(where, Word):
            return None
        shown = [f"{k}={_quoted(v or '')}" if v is not None else k for k, v in new_env]
        prefix = "".join(f"-e {e} " for e in shown) if docker else "".join(f"{e} " for e in shown)
        inserts.append((where.start, prefix))

    if docker:
        kept_opts = {id(o.src[0]) for o in after.docker_opts if o.src}
        for o in before.docker_opts:
            if o.src and id(o.src[0]) not in kept_opts:
                if not _placed(o.src):
                    return None
                cuts.append((_cut_start(text, o.src[0].start), o.src[-1].end))  # type: ignore[attr-defined]
        new_opts: list[Arg] = [o for o in after.docker_opts if not o.src]
        if new_opts:
            if not isinstance(image, Word):
                return None
            shown_opts = " ".join(" ".join(arg_tokens(o)) for o in new_opts)
            inserts.append((image.start, shown_opts + " "))

    edits = sorted(
        [(s, e, "") for s, e in cuts] + [(at, at, t) for at, t in inserts], key=lambda x: (x[0], x[1])
    )
    out, pos = [], 0
    for start, end, new in edits:
        if start < pos:
            return None  # overlapping edits: not a plain change of this text
        out += [text[pos:start], new]
        pos = end
    out.append(text[pos:])
    result = "".join(out).strip("\n")
    if serve_line.looks_like_yaml(text) and not _reads_as(result, after):
        return None  # the YAML would not read back as the fixed command: printed rebuilt instead
    return result


def _reads_as(text: str, cmd: ServeCommand) -> bool:
    """Whether `text` reads back as `cmd`: its model, env, flags and values, docker options."""
    try:
        again = parse(text)
    except UsageError:
        return False
    return again.model == cmd.model and again.same_settings(cmd)


def _image_word(cmd: ServeCommand) -> str | None:
    return cmd.image

"""Find the vLLM invocation in what people paste as "the command": a shell chain (`&&`, `;`, `|`,
`env X=1`, `export`, `bash -c "..."`, `exec`), `docker run`, `python -m vllm.entrypoints...`, a
Kubernetes or compose YAML (`command:` + `args:` lists, `- --flag=value` items), a multi-line
paste with `\\` continuations, terminal colours and prompts.

The result is the token list of ONE command (env assignments first), as a shell would pass it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any

from kvops.doctor.reading import docker_run, engines, shell_words
from kvops.errors import UsageError

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")
# "> " quote markers, then "$ ", "# ", "user@host:~/dir$ ", "(venv) $ " at the start of a pasted line.
_QUOTE = re.compile(r"^[ \t]*(?:>[ \t]+)+")
# a bare "# " is a comment, not a prompt: only user@host:~# is root's prompt
_PROMPT = re.compile(r"^(?:\([\w.-]+\)[ \t]*)?(?:[\w.-]+@[\w.-]+(?::[^\s$#]*)?[ \t]*[$#%>]|[$%>])[ \t]+")
_FENCE = re.compile(r"^[ \t]*(?:```|~~~|''')[\w+-]*[ \t]*$", re.M)  # Markdown / quoted code fences
_ENV_ASSIGN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=.*")
_WRAPPERS = {"sudo", "exec", "nohup", "time", "command", "stdbuf", "nice", "taskset", "numactl"}
_SHELLS = re.compile(r"(?:.*/)?(?:ba|z|da|k)?sh$")
_OPERATORS = {"&&", "||", ";", "|", "&", ";;", "|&", "(", ")"}
_REDIRECTS = {">", ">>", "<", ">&", "&>", "&>>", ">|", "<<", "<<<", "<&", "<>"}


def clean(text: str) -> str:
    """Colours, CRLF, prompts, Markdown code fences / inline-code backticks and a trailing `\\`
    removed (a paste cut after it); lines and `\\` continuations kept (shell_words reads them, and
    a fixed command gives them back as written)."""
    text = _ANSI.sub("", text).replace("\r\n", "\n").replace("\r", "\n")
    text = _FENCE.sub("", text)
    stripped = text.strip()
    if len(stripped) > 1 and stripped[0] == stripped[-1] == "`" and stripped.count("`") == 2:
        text = stripped[1:-1]
    text = re.sub(r"\\[ \t]+(?=\n)", "\\\\", text)  # `\ ` at a line's end: a continuation all the same
    text = re.sub(r"\\[ \t]*$", "", text)  # a paste cut after its last `\`
    out: list[str] = []
    quoted = False  # the command's first line had "> " quote markers: its continuations have too
    for line in text.split("\n"):
        continued = bool(out) and out[-1].endswith("\\")
        if continued and not quoted:  # `\` then `  > out.log`: a redirection, not a quote marker
            out.append(line)
            continue
        unquoted = _QUOTE.sub("", line, count=1)
        quoted = unquoted != line if not continued else quoted
        out.append(unquoted if continued else _PROMPT.sub("", unquoted, count=1))
    return "\n".join(out)


def is_launch(tokens: list[str]) -> bool:
    """vllm serve, python -m vllm.entrypoints..., SGLang's or Dynamo's launch, or docker/podman run."""
    if engines.other_launch(tokens) is not None:
        return True
    if len(tokens) >= 2 and tokens[0].endswith("vllm") and tokens[1] == "serve":
        return True
    if len(tokens) >= 3 and re.search(r"python[\d.]*$", tokens[0]) and tokens[1] == "-m":
        return tokens[2].startswith("vllm.entrypoints")
    return len(tokens) >= 2 and tokens[0].split("/")[-1] in ("docker", "podman") and tokens[1] == "run"


def extract(text: str) -> list[str]:
    """The tokens of the vLLM command in `text` (env assignments first); UsageError when none."""
    cleaned = clean(text)
    if looks_like_yaml(cleaned):
        found = _from_yaml(cleaned)
        if found is not None:
            # words split out of a string scalar whose characters are found in the text as
            # written keep their place there (_placed_words); the others are plain str
            return found
    found = _from_shell(cleaned, depth=0)
    if found is not None:
        return found
    if not cleaned.strip():
        raise UsageError("--cmd is empty")
    raise UsageError(
        "--cmd is not a vllm serve, python -m vllm.entrypoints.openai.api_server or docker run line"
    )


def _split(text: str) -> list[str]:
    """Shell words (shell_words.Word: each knows where it is written); unquoted operators come
    back as Op so that a quoted ';' stays a word."""
    return [Op(w) if w.op else w for w in shell_words.split(text)]


class Op(str):
    """A shell operator found outside quotes (a quoted ';' is a plain str)."""


def _segments(tokens: list[str]) -> Iterator[list[str]]:
    """Simple commands of a chain, redirections (`> log`, `2>&1`) removed."""
    seg: list[str] = []
    skip = False
    for tok in tokens:
        if skip:
            skip = False
            continue
        if isinstance(tok, Op) and tok in _REDIRECTS:  # (shell_words drops the `2` of `2>&1`)
            skip = True
            continue
        if isinstance(tok, Op):
            if seg:
                yield seg
            seg = []
        else:
            seg.append(tok)
    if seg:
        yield seg


def _from_shell(text: str, depth: int) -> list[str] | None:
    """The first segment of the chain that launches vLLM, with the env the chain set before it."""
    if depth > 4:
        return None
    exported: list[str] = []
    tokens = _split(text)
    for seg in _segments(tokens):
        env: list[str] = []
        while seg:
            head = seg[0]
            if head == "export" or head == "env":
                seg = seg[1:]
                while seg and (seg[0].startswith("-") and head == "env"):
                    seg = seg[2:] if seg[0] in ("-u", "--unset", "-C", "--chdir") else seg[1:]
                if head == "export":
                    exported += [t for t in seg if _ENV_ASSIGN.fullmatch(t)]
                    seg = []
            elif _ENV_ASSIGN.fullmatch(head):
                env.append(head)
                seg = seg[1:]
            elif head in _WRAPPERS:
                seg = seg[1:]
                while seg and seg[0].startswith("-"):  # wrapper options (sudo -E, nice -n 5)
                    seg = seg[2:] if seg[0] in ("-n", "-u", "-c", "-g") and head != "exec" else seg[1:]
            elif head == "timeout" and len(seg) > 1:
                seg = seg[2:]
            else:
                break
        if not seg:
            continue
        if _SHELLS.match(seg[0]) and _has_c(seg[1:3]):
            script = next((t for t in seg[1:] if not t.startswith("-")), None)
            inner = _rebased(_from_shell(script, depth + 1), script, text) if script else None
            if inner is not None:
                return [*exported, *env, *inner]
            continue
        if is_launch(seg):
            return [*exported, *env, *_docker_inner(seg, depth, text)]
    return None


def _rebased(inner: list[str] | None, script: str, text: str) -> list[str] | None:
    """Words of a `bash -c SCRIPT` script placed in the outer text: when SCRIPT is written as
    one plain quoted string (its text between the quotes is its value), each inner word is at
    the script's start + 1 + its own offset; otherwise the inner words carry no place."""
    if inner is None:
        return None
    start = getattr(script, "start", None)
    end = getattr(script, "end", None)
    simple = start is not None and text[start:end] in (f"'{script}'", f'"{script}"')
    out: list[str] = []
    for t in inner:
        if simple and start is not None and isinstance(t, shell_words.Word):
            out.append(shell_words.Word(str(t), t.start + start + 1, t.end + start + 1, t.op, t.quoted))
        else:
            out.append(str(t))
    return out


def _has_c(options: list[str]) -> bool:
    """`-c`, `-lc`, `-ec`: the shell runs the next word as a script."""
    return any(o.startswith("-") and not o.startswith("--") and "c" in o for o in options)


def _docker_inner(seg: list[str], depth: int, text: str) -> list[str]:
    """docker run ... IMAGE bash -c "vllm serve ..." (or --entrypoint bash IMAGE -c "..."): keep
    the docker part, unwrap the shell."""
    if seg[0].split("/")[-1] not in ("docker", "podman"):
        return seg
    at = docker_run.image_index(seg[2:])
    if at is None:
        return seg
    image = at + 2
    head, rest = seg[: image + 1], seg[image + 1 :]
    entry = None
    for i, t in enumerate(head):
        if t == "--entrypoint" and i + 1 < image:
            entry = head[i + 1]
        elif t.startswith("--entrypoint="):
            entry = t.partition("=")[2]
    script = None
    if entry and _SHELLS.match(entry) and len(rest) >= 2 and _has_c(rest[:1]):
        script = rest[1]
        keep = [
            i
            for i, t in enumerate(head)
            if not (t.startswith("--entrypoint") or head[i - 1] == "--entrypoint")
        ]
        head = [head[i] for i in keep]
    elif rest and _SHELLS.match(rest[0]) and len(rest) >= 3 and _has_c(rest[1:2]):
        script = rest[2]
    inner = _rebased(_from_shell(script, depth + 1), script, text) if script else None
    if inner is None:
        return seg
    env = [t for t in inner if _ENV_ASSIGN.fullmatch(t)]  # set inside the container: docker -e
    return [*head[:2], *[x for t in env for x in ("-e", t)], *head[2:], *inner[len(env) :]]


# ---- YAML: Kubernetes containers, compose services ---------------------------------------------
def looks_like_yaml(text: str) -> bool:
    return bool(re.search(r"^\s*(?:-\s+)?(?:command|args|entrypoint)\s*:", text, re.M)) or bool(
        re.search(r"^\s*-\s+['\"]?--?[A-Za-z]", text, re.M)
    )


def _from_yaml(text: str) -> list[str] | None:
    import yaml

    from kvops.doctor.reading import yaml_bounded

    try:
        doc = yaml_bounded.load_all(text, keep_nodes=True)
    except yaml_bounded.AliasBombError as exc:
        raise UsageError(f"--cmd is YAML whose {exc}; paste the service's command expanded") from None
    except yaml.YAMLError:
        return None
    for node in _walk(doc):
        if not isinstance(node, dict):
            continue
        command, args = node.get("command"), node.get("args")
        if command is None and args is None:
            continue
        tokens = [
            *_as_tokens(node.get("entrypoint"), text),
            *_as_tokens(command, text),
            *_as_tokens(args, text),
        ]
        env = [f"{k}={v}" for k, v in _env_pairs(node.get("env") or node.get("environment"))]
        found = _from_tokens(tokens, text) if tokens else None
        if found is not None:
            return [*env, *found]
        image = str(node.get("image") or "")
        if "vllm" in image and tokens and _images_arguments(node, tokens):
            return [*env, "vllm", "serve", *tokens]  # the vllm-openai image's entrypoint is vllm serve
    lists = [n for n in _walk(doc) if isinstance(n, list) and n and all(isinstance(x, str) for x in n)]
    for items in lists:
        found = _from_tokens(list(items), text)
        if found is not None:
            return found
    return None


def yaml_strings(text: str) -> list[str]:
    """The string values of a compose file or manifest that name vLLM (an `sh -c` script is
    one), in document order; none where the text is not YAML or is an alias bomb. A folded
    scalar's lines come back joined, as the shell that runs it sees them."""
    import yaml

    from kvops.doctor.reading import yaml_bounded

    try:
        doc = yaml_bounded.load_all(text)
    except (yaml.YAMLError, yaml_bounded.AliasBombError):
        return []
    return [n for n in _walk(doc) if isinstance(n, str) and "vllm" in n]


def _images_arguments(node: dict[Any, Any], tokens: list[str]) -> bool:
    """Whether a container's words are arguments to its image's entrypoint (`vllm serve`): flags
    first, or a served model first (`args: [/models/weights, --port, ...]`, vllm serve's
    positional) where nothing replaces the entrypoint: no `entrypoint:`, and no Kubernetes
    `command:` beside its `args:`; never a shell or a program named by path."""
    if tokens[0].startswith("-"):
        return True
    if "entrypoint" in node or ("command" in node and "args" in node) or _SHELLS.match(tokens[0]):
        return False
    return len(tokens) > 1 and tokens[1].startswith("-") and not tokens[0].startswith(("/bin/", "/usr/"))


def _from_tokens(tokens: list[str], text: str) -> list[str] | None:
    if is_launch(tokens):
        return [t if isinstance(t, shell_words.Word) else str(t) for t in tokens]
    script = None
    if tokens and _SHELLS.match(tokens[0]) and len(tokens) >= 3 and tokens[1].startswith("-"):
        script = tokens[2]
    elif len(tokens) == 1:
        script = tokens[0]
    if script is None:
        return None
    return _placed_words(_from_shell(str(script), 1), script, text)


def _as_tokens(value: Any, text: str) -> list[str]:
    """A YAML value as the words it passes: a list's items as they are (not placed: a flag cut
    from a list would leave its comma or its `- `), a string split as compose splits it, as
    shlex does without a shell (a `>` block's newlines are blanks, `&&` is a word; a `bash -c`
    script is read as a shell by _from_tokens), each word placed in the text where it can be."""
    if value is None:
        return []
    if isinstance(value, list):
        if len(value) == 1 and isinstance(value[0], str):
            return [value[0]]  # kept with its place: a one-item list may hold a whole script
        return [str(v) for v in value]
    return _placed_words(shell_words.split(str(value), newline_ends_command=False), value, text) or []


def _placed_words(words: Sequence[str] | None, value: object, text: str) -> list[str] | None:
    """Words split out of a YAML string scalar, each placed (shell_words.Word) where its
    characters are written in `text` when the scalar's are found there one for one, else str."""
    if words is None:
        return None
    places = _scalar_places(value, text)
    out: list[str] = []
    for w in words:
        if places is not None and isinstance(w, shell_words.Word) and 0 <= w.start < w.end <= len(places):
            start, end = places[w.start], places[w.end - 1] + 1
            if text[start:end] == str(value)[w.start : w.end]:
                out.append(shell_words.Word(str(w), start, end, w.op, w.quoted))
                continue
        out.append(str(w))
    return out


def _scalar_places(value: object, text: str) -> list[int] | None:
    """Where each character of a YAML string scalar (yaml_bounded.ScalarText) is written in
    `text`: a plain or quoted scalar written on one line without escapes, or a `|` or `>` block
    whose lines are its text indented (no indentation indicator; a `>` block without blank or
    more-indented lines). None for any other (escapes, folded plain scalars), or when the
    characters read back differ from the value."""
    node = getattr(value, "node", None)
    if node is None or not isinstance(value, str):
        return None
    start, end, style = node.start_mark.index, node.end_mark.index, node.style
    if style in ("'", '"'):
        start, end = start + 1, end - 1
    if style in (None, "'", '"'):
        return list(range(start, end)) if text[start:end] == value else None
    if style not in ("|", ">"):
        return None
    header_end = text.find("\n", start, end)
    if header_end < 0 or any(c.isdigit() for c in text[start:header_end].split("#")[0]):
        return None
    lines: list[tuple[int, int]] = []  # (where the line's content starts, where it ends)
    indent: int | None = None
    at = header_end + 1
    while at < end:
        stop = text.find("\n", at, end)
        stop = end if stop < 0 else stop
        line = text[at:stop]
        if line.strip():
            if indent is None:
                indent = len(line) - len(line.lstrip(" "))
            if line[:indent].strip(" ") or len(line) < indent:
                return None  # less indented than the block: not read here
            lines.append((at + indent, stop))
        else:
            lines.append((stop, stop))
        at = stop + 1
    while lines and lines[-1][0] == lines[-1][1]:  # trailing blank lines: the chomping's
        lines.pop()
    places: list[int] = []
    for n, (a, b) in enumerate(lines):
        if style == ">" and (a == b or text[a] == " "):
            return None  # folding of blank and more-indented lines: not read here
        if n:
            places.append(lines[n - 1][1])  # the line break ("\n" in `|`, a blank in `>`)
        places.extend(range(a, b))
    body = value.rstrip("\n")
    written = "".join(("\n" if style == "|" else " ") if text[i] == "\n" else text[i] for i in places)
    if written != body:
        return None
    return places + [lines[-1][1] if lines else end] * (len(value) - len(body))


def _env_pairs(env: Any) -> list[tuple[str, str]]:
    if isinstance(env, dict):
        return [(str(k), str(v)) for k, v in env.items() if v is not None]
    out = []
    for item in env or []:
        if isinstance(item, dict) and "name" in item and "value" in item:
            out.append((str(item["name"]), str(item["value"])))
        elif isinstance(item, str) and "=" in item:
            k, _, v = item.partition("=")
            out.append((k, v))
    return out


def _walk(node: Any, limit: int = 20_000) -> Iterator[Any]:
    """Every node once (YAML aliases can make a document refer to itself or fan out
    exponentially), at most `limit` of them."""
    seen: set[int] = set()
    stack = [node]
    while stack and len(seen) < limit:
        item = stack.pop()
        if isinstance(item, (dict, list)):
            if id(item) in seen:
                continue
            seen.add(id(item))
            children = list(item.values()) if isinstance(item, dict) else list(item)
            stack.extend(reversed(children))
        yield item


# What a line runs besides its serve command, shown apart (never pasted): the parts of the text no
# word of the serve segment covers. A part that is only operators, blanks, `\` line breaks or the
# words that merely start the segment (`export`, `env`, wrappers) runs nothing else.
_HARMLESS_PART = re.compile(r"(?:[\s\\;&|()]|\b(?:export|env|exec|sudo|nohup|time|command)\b)*")


def outside(text: str, tokens: Sequence[str]) -> list[str] | None:
    """The pieces of `text` (serve_line.clean's) that `tokens` (extract's, of that text) leave out
    and that run something; None when a token has no place in the text (a YAML list item, a
    `bash -c` script written with escapes): what else runs cannot be told apart then."""
    placed = [t for t in tokens if isinstance(t, shell_words.Word)]
    if len(placed) != len(tokens):
        return None
    pieces: list[str] = []
    pos = 0
    for word in sorted(placed, key=lambda w: w.start):
        pieces.append(text[pos : word.start])
        pos = max(pos, word.end)
    pieces.append(text[pos:])
    return [p.strip() for p in pieces if not _HARMLESS_PART.fullmatch(p)]


def substitutions(tokens: Sequence[str]) -> list[str]:
    """The words that hold a command substitution, `$(...)` or backticks (as a shell would run it)."""
    return [str(t) for t in tokens if "$(" in t or "`" in t]

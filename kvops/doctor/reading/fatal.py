"""The first fatal error of a log, kept for when no playbook knows it.

"No known failure matched" with the fatal line never shown sends the reader back to the log; a
failure the catalog does not know is still worth one `info` finding that quotes it: the first fatal
line, the exception (type and message), the component that raised it (the package of the deepest
traceback frame) and terms to search the trackers with.

Fed one line at a time by logs.scan (prefix already stripped), it holds a few strings whatever the
log's size. Only the first traceback counts: with several ranks or restarts, later ones repeat it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Python's exception line: `RuntimeError: msg`, `torch.OutOfMemoryError: msg`, a bare `AssertionError`.
EXCEPTION = re.compile(
    r"^(?P<type>(?:[A-Za-z_]\w*\.){0,4}[A-Z]\w{0,60}(?:Error|Exception|Exit|Interrupt|Fault))(?::\s?(?P<msg>.*))?$"
)
# Fatal without a Python exception: a crash of the interpreter, a Rust panic (Dynamo/KVBM), a C++ abort.
CRASH = re.compile(
    r"Fatal Python error: .{1,200}|thread '[^']{0,80}' panicked at .{1,300}"
    r"|Segmentation fault(?: \(core dumped\))?"
    r"|terminate called after throwing .{1,200}|\bAborted \(core dumped\)"
)
# Fatal lines that are not Python exceptions and do not stop the search for one: a GPU memory fault
# (HIP / CUDA runtime), a native library's glog `E`/`F` line, a watchdog or timeout abort, an
# engine's ERROR line saying it stops.
NATIVE = re.compile(  # no leading wildcard: searched on lines of any length
    r"Memory access fault by GPU node-\d+|an illegal memory access was encountered"
    r"|^[EF]\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+\s+[\w./-]+:\d+\] \S"
    r"|[Ww]atchdog (?:caught|timeout|timed out|hang)"
    r"|(?:NCCL|[Ww]atchdog)\b[^\n]{0,40}?(?:timed out|timeout)"
)
# An ERROR/CRITICAL line that says the engine stops (quoted when no exception follows it).
STOPS = re.compile(
    r"failed to start|initiali[sz]ation failed|died unexpectedly|is dead|exited unexpectedly"
    r"|shutting down|[Ff]atal|Received sigquit|hit an exception|terminat",
    re.I,
)
FRAME = re.compile(r'^\s*File "(?P<path>[^"]{1,400})", line \d+')
TRACEBACK = "Traceback (most recent call last)"
# The package a frame's path belongs to: the directory after site-packages/dist-packages, else a
# checkout's top package (`/sgl-workspace/sglang/python/sglang/srt/...`).
_PACKAGE = re.compile(r"(?:site|dist)-packages/(?P<pkg>[\w.-]+)/(?P<rest>[\w./-]*)")
_CHECKOUT = re.compile(
    r".*/(?P<pkg>vllm|sglang|lmcache|dynamo|kvbm|llmd_fs_backend|torch|flashinfer|triton)/(?P<rest>[\w./-]*)"
)
# substrings of every line feed() uses: a cheap test before it is called
HINTS: tuple[str, ...] = (
    "Error",
    "Exception",
    "Traceback",
    "Fatal",
    "panicked",
    "Segmentation",
    "terminate",
    "Abort",
)
HINTS += ('File "', "ERROR", "CRITICAL", "Fault", "Exit", "Interrupt", "access fault", "atchdog")
# glog's `E1128 12:00:00.000 ...`: looked for on the lines of a block read line by line (a block
# with another hint, the first block); a block-wide search for so short a needle would cost every
# block of a long log more than all the other hints together
LINE_HINTS = (*HINTS, "E0", "E1", "F0", "F1")
MAX_TEXT = 300
WINDOW = 80  # a traceback's frames and its exception are at most this many lines apart


def _component(path: str) -> str | None:
    m = _PACKAGE.search(path) or _CHECKOUT.match(path)  # a checkout's innermost package
    if not m:
        return None
    return f"{m.group('pkg')}/{m.group('rest')}".rstrip("/")


# A report's own sentence ("the service shuts down ... with a watchdog timeout error displayed."):
# no log prefix before it, words and spaces, and it ends as a sentence does.
_SENTENCE = re.compile(r"^[A-Za-z][\w'’,;()-]*(?: [\w'’,;()/-]+){6,}[.!?]$")


def _prose(text: str, raw: str | None) -> bool:
    """Whether a native fatal line is prose: a report's sentence that names a watchdog or a
    fault, which the log's own line (with its prefix) after it should stand for."""
    return (raw is None or raw.strip() == text) and bool(_SENTENCE.match(text))


@dataclass
class Fatal:
    first_line: tuple[int, str] | None = None  # the first line of the failure (traceback or crash)
    exception: tuple[int, str] | None = None  # the exception (type: message) or the crash line
    component: str | None = None  # package/path.py of the deepest frame before the exception
    frame_at: int = 0
    exception_text: str = ""  # the exception line without the log's prefix
    # a fatal line that is not a Python exception (GPU fault, glog E/F, watchdog), kept beside it
    native: tuple[int, str] | None = None
    # an exception line with no traceback before it (a one-line paste): quoted when no traceback is
    bare: tuple[int, str, str] | None = None
    stop_line: tuple[int, str, str] | None = None  # an ERROR line saying the engine stops
    _native_is_prose: bool = False  # the kept native line is a report's sentence, not a log line

    def settle(self) -> None:
        """At the end of the log: a bare exception line, else an engine's stop line, else a native
        fatal line, stands for the failure when no traceback ended in an exception."""
        if self.exception is not None:
            return
        kept = self.bare or self.stop_line
        if kept is not None:
            self.exception, self.exception_text = (kept[0], kept[1]), kept[2]
        elif self.native is not None:
            self.exception, self.exception_text = self.native, self.native[1]

    def feed(self, line_no: int, msg: str, level: str | None = None, raw: str | None = None) -> None:
        """One log line, its prefix stripped (`level`: the prefix's ERROR, CRITICAL...; `raw`: the
        line as written, which is what is quoted); does nothing once the first failure is known."""
        if self.exception is not None:
            return
        text = msg.strip()
        if not text:
            return
        shown = (raw if raw is not None else msg).strip()[:MAX_TEXT]
        if (self.native is None or self._native_is_prose) and NATIVE.search(text):
            prose = _prose(text, raw)
            if self.native is not None and prose:
                return  # a sentence after a sentence: the first one stays
            if self.native is not None and self.first_line == self.native:
                self.first_line = None  # the report's sentence gives way to the log's own line
            self.native, self._native_is_prose = (line_no, shown), prose
            if self.first_line is None:
                self.first_line, self.frame_at = (line_no, shown), line_no
            return
        if level in ("ERROR", "CRITICAL") and (self.first_line is None or line_no - self.frame_at > WINDOW):
            self.first_line = (line_no, shown)  # "EngineCore failed to start." before its traceback
            self.frame_at = line_no
        if text.startswith(TRACEBACK) or text.endswith(TRACEBACK + ":"):
            if self.first_line is None or line_no - self.frame_at > WINDOW:
                self.first_line = (line_no, shown)
            self.frame_at = line_no
            return
        frame = FRAME.match(text)
        if frame:
            if self.first_line is None or line_no - self.frame_at > WINDOW:
                self.first_line = (line_no, shown)
            self.component = _component(frame.group("path")) or self.component
            self.frame_at = line_no
            return
        crash = CRASH.search(text)
        if crash:
            if self.first_line is None or line_no - self.frame_at > WINDOW:
                self.first_line = (line_no, shown)
            self.exception, self.exception_text = (line_no, shown), crash.group()[:MAX_TEXT]
            return
        exc = EXCEPTION.match(text)
        if exc and self.first_line is not None and line_no - self.frame_at <= WINDOW:
            self.exception = (line_no, shown)
            self.exception_text = text[:MAX_TEXT]
        elif exc and exc.group("msg") and self.bare is None and level not in ("INFO", "DEBUG", "WARNING"):
            self.bare = (line_no, shown, text[:MAX_TEXT])
        elif level in ("ERROR", "CRITICAL") and self.stop_line is None and STOPS.search(text):
            self.stop_line = (line_no, shown, text[:MAX_TEXT])

    @property
    def found(self) -> bool:
        return self.exception is not None

    def search_terms(self, engine: str) -> str:
        """What to paste into a tracker's search: the exception type, its message without the
        numbers, paths and ids that differ per run, and the component."""
        assert self.exception is not None
        text = self.exception_text or self.exception[1]
        m = EXCEPTION.match(text)
        kind, message = (m.group("type").rsplit(".", 1)[-1], m.group("msg") or "") if m else ("", text)
        message = re.sub(r"'[^']*'|\"[^\"]*\"|\S*[/\\]\S*|0x[0-9a-f]+|\b\d[\d.,:]*\w*", " ", message)
        words = " ".join([w for w in message.split() if re.fullmatch(r"[A-Za-z][\w-]*", w)][:12])
        parts = [engine, kind, words]
        if self.component:
            package, _, rest = self.component.partition("/")
            parts += [package, rest.rsplit("/", 1)[-1].removesuffix(".py")]
        return " ".join(p for p in parts if p)

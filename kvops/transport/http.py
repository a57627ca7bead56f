"""Fetching a /metrics body within a deadline and a size bound.

A socket read timeout is per read: a target that trickles a byte a second never trips it.
libcurl's TIMEOUT_MS bounds the whole exchange instead, connect to last byte. Redirects are
followed only within the same origin, so a target cannot send kvops (and its bearer token)
to another host.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from http import HTTPStatus
from urllib.parse import quote, urlsplit, urlunsplit

import certifi
import pycurl

from kvops.errors import UsageError, one_line
from kvops.transport.address import host_port

DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024
_READ_CHUNK = 64 * 1024
_MAX_REDIRECTS = 3
_ERROR_BODY_BYTES = 65536  # what an error answer keeps of its body (FetchError.body)


class FetchError(Exception):
    """One-line reason a scrape failed (shown in logs and `kvops top`).

    On an HTTP error status, `status` and the start of the answer's `body` are kept, for a
    caller whose server explains itself in the body (the Kubernetes API's Status object).
    """

    def __init__(self, message: str, status: int | None = None, body: bytes = b"") -> None:
        super().__init__(message)
        self.status = status
        self.body = body


def normalise_target(url: str) -> str:
    """`scheme://host:port[/path]` for a target as given (docs/DESIGN.md's `target` label).

    Accepts `host:port` without a scheme (http assumed). Raises UsageError on anything that is
    not an http(s) URL with a host and a port from 1 to 65535.
    """
    raw = url.strip()
    if not raw.isprintable():
        raise UsageError(f"target {url!r}: control characters in the URL")
    if "://" not in raw:
        raw = "http://" + raw
    try:
        parts = urlsplit(raw)
    except ValueError:  # an unbalanced [ or ] around an IPv6 host
        raise UsageError(f"target {url!r}: not a valid URL") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise UsageError(f"target {url!r}: only http and https URLs can be scraped")
    try:
        parts.port  # noqa: B018 - raises on a port that is not a number in range
    except ValueError:
        raise UsageError(f"target {url!r}: bad port") from None
    if not parts.hostname:
        raise UsageError(f"target {url!r}: no host")
    if parts.username or parts.password:
        raise UsageError(f"target {url!r}: put credentials in --config, not in the URL")
    address = host_port(raw)
    assert address is not None  # hostname and port were checked above
    host, port = address
    if port == 0:  # port 0 means "any" to a listener; a target has to name its port
        raise UsageError(f"target {url!r}: port 0 cannot be scraped")
    netloc = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    path = parts.path.rstrip("/")
    return urlunsplit((scheme, netloc, path, parts.query, ""))


def metrics_url(target: str) -> str:
    """The URL to GET: the target itself if it names /metrics, else base + /metrics."""
    parts = urlsplit(target)
    if parts.path.endswith("/metrics"):
        return target
    return urlunsplit((parts.scheme, parts.netloc, parts.path + "/metrics", parts.query, ""))


# Samples kept from one page: 18 per vLLM engine, 171 on a 10-model x 10-engine page; a page
# past this is a label explosion, not a node (docs/DESIGN.md: the target is then down).
DEFAULT_MAX_SAMPLES = 50_000


@dataclass
class FetchOptions:
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    max_samples: int = DEFAULT_MAX_SAMPLES  # samples kept from one page (its wanted families)
    bearer_token: str | None = None
    ca_file: str | None = None  # verify TLS against this CA bundle (else the system's)
    accept: str = "text/plain;version=0.0.4"  # the Prometheus text format, unless asked otherwise
    extra_headers: tuple[str, ...] = ()  # "Name: value" lines (Basic auth, X-Scope-OrgID)


def _same_origin(a: str, b: str) -> bool:
    return urlsplit(a).scheme.lower() == urlsplit(b).scheme.lower() and host_port(a) == host_port(b)


_REDIRECTS = (301, 302, 303, 307, 308)
_TLS_ERRORS = {
    pycurl.E_SSL_CONNECT_ERROR, pycurl.E_PEER_FAILED_VERIFICATION, pycurl.E_SSL_CACERT,
    pycurl.E_SSL_CACERT_BADFILE, pycurl.E_SSL_CERTPROBLEM, pycurl.E_SSL_CIPHER,
    pycurl.E_SSL_ISSUER_ERROR, pycurl.E_SSL_INVALIDCERTSTATUS, pycurl.E_USE_SSL_FAILED,
}  # fmt: skip
_BROKEN = {pycurl.E_GOT_NOTHING, pycurl.E_RECV_ERROR, pycurl.E_SEND_ERROR, pycurl.E_PARTIAL_FILE,
           pycurl.E_FTP_WEIRD_SERVER_REPLY}  # fmt: skip
# (E_FTP_WEIRD_SERVER_REPLY is code 8, which libcurl has since renamed WEIRD_SERVER_REPLY.)


MAX_REASON_CHARS = 200  # of libcurl's message in a reason (a status line can be 200 KB)

# curl.h's names where pycurl has none (codes of libcurl 7.66 to 8.8) or only an older one.
_CURL_H_NAMES = {8: "WEIRD_SERVER_REPLY", 22: "HTTP_RETURNED_ERROR", 60: "PEER_FAILED_VERIFICATION",
                 95: "HTTP3", 96: "QUIC_CONNECT_ERROR", 97: "PROXY", 98: "SSL_CLIENTCERT",
                 99: "UNRECOVERABLE_POLL", 100: "TOO_LARGE", 101: "ECH_REQUIRED"}  # fmt: skip


def _code_names() -> dict[int, str]:
    """CURLcode -> its name in curl.h, from pycurl's E_ constants (aliases of older releases
    and the multi interface's codes left out)."""
    names: dict[int, str] = {}
    for attr in sorted(dir(pycurl), key=len):  # the shortest of a code's aliases
        value = getattr(pycurl, attr)
        if attr.startswith("E_") and not attr.startswith("E_MULTI_") and isinstance(value, int):
            names.setdefault(value, attr[2:])
    return {**names, **_CURL_H_NAMES}


_CODE_NAMES = _code_names()


def curl_code_text(code: object) -> str:
    """A libcurl error that came without a message: its code and, where known, curl.h's name."""
    if not isinstance(code, int):
        return "libcurl error without a code"
    name = _CODE_NAMES.get(code)
    return f"libcurl error {code} (CURLE_{name})" if name else f"libcurl error {code}"


class _Body:
    """libcurl's write callback: keeps the body up to the size bound, then stops the transfer."""

    def __init__(self, max_bytes: int) -> None:
        self.chunks: list[bytes] = []
        self.size = 0
        self.max_bytes = max_bytes
        self.over = False

    def write(self, chunk: bytes) -> int | None:
        self.size += len(chunk)
        if self.size > self.max_bytes:
            self.over = True
            return 0  # anything but len(chunk) makes libcurl abort with E_WRITE_ERROR
        self.chunks.append(chunk)
        return None


class HttpClient:
    """GETs over one libcurl handle, which keeps its connection alive between scrapes.

    Why libcurl: the body, the TLS and the deadline are handled in C. Per 75 KiB /metrics
    page the fetching thread spent 0.42 ms of CPU with urllib3, 0.21 ms with http.client and
    0.12 ms with libcurl (benchmarks/fetch_bench.py, one run), for each target each second in
    `kvops top` and each scrape in the exporter. A handle is not thread-safe: one
    fetch at a time (TargetScraper holds a lock around it). Many clients' fetches can run
    together in one thread (kvops.transport.multi).
    """

    def __init__(self, options: FetchOptions | None = None) -> None:
        self.options = options or FetchOptions()
        # close() may come from another thread while a hung target holds perform(): the handle
        # is then closed by the fetching thread when perform() returns (at the deadline).
        self._state = threading.Lock()
        self._busy = False
        self._closing = False
        curl = self._curl = pycurl.Curl()
        curl.setopt(pycurl.NOSIGNAL, 1)  # timeouts without SIGALRM: safe in threads
        curl.setopt(pycurl.PROXY, "")  # a proxy from the environment must not see the scrape
        curl.setopt(pycurl.FOLLOWLOCATION, 0)  # redirects are checked here, same origin only
        curl.setopt(pycurl.PROTOCOLS, pycurl.PROTO_HTTP | pycurl.PROTO_HTTPS)
        curl.setopt(pycurl.HTTP_VERSION, pycurl.CURL_HTTP_VERSION_1_1)
        curl.setopt(pycurl.BUFFERSIZE, _READ_CHUNK)  # fewer write callbacks per body
        curl.setopt(pycurl.CAINFO, self.options.ca_file or certifi.where())
        headers = [f"Accept: {self.options.accept}", "Accept-Encoding: identity", "User-Agent: kvops"]
        if self.options.bearer_token:
            headers.append(f"Authorization: Bearer {self.options.bearer_token}")
        headers.extend(self.options.extra_headers)
        curl.setopt(pycurl.HTTPHEADER, headers)

    @property
    def handle(self) -> pycurl.Curl:
        return self._curl

    def fetch_text(self, url: str, deadline: float) -> str:
        """GET url and return its body as text, or raise FetchError with a one-line reason."""
        transfer = Transfer(self, url)
        while True:
            transfer.start(deadline)
            error = None
            try:
                self._curl.perform()
            except pycurl.error as exc:
                error = exc
            text = transfer.done(error)
            if text is not None:
                return text

    def _claim(self) -> None:
        with self._state:
            if self._closing:
                raise FetchError("closed")
            self._busy = True

    def _release(self) -> None:
        with self._state:
            self._busy = False
            if self._closing:
                self._curl.close()

    def _reason(self, exc: pycurl.error, body: _Body) -> str:
        code = exc.args[0] if exc.args else None
        said = str(exc.args[1]).strip() if len(exc.args) > 1 else ""
        # A multi handle's failure can come without libcurl's words (a 200 KB status line was
        # "str", the type's name one_line falls back on): the code is named instead.
        message = one_line(said, MAX_REASON_CHARS) if said else curl_code_text(code)
        limit = self.options.max_body_bytes
        if body.over:
            return f"body over the limit of {limit} bytes"
        if code == pycurl.E_FILESIZE_EXCEEDED:  # on its Content-Length, or (libcurl 8.4+) midway
            declared = self._curl.getinfo(pycurl.CONTENT_LENGTH_DOWNLOAD_T)
            if declared > limit:
                return f"body of {declared} bytes is over the limit of {limit}"
            return f"body over the limit of {limit} bytes"
        if code == pycurl.E_UNSUPPORTED_PROTOCOL and "HTTP/0.9" in message:
            return f"not an HTTP response: {message}"  # garbage where a status line belongs
        if code == pycurl.E_OPERATION_TIMEDOUT:
            return self._timeout_phase(message, body)
        if code == pycurl.E_COULDNT_CONNECT:
            errno = self._curl.getinfo(pycurl.OS_ERRNO)
            return f"connection failed: [Errno {errno}] {os.strerror(errno)}" if errno else message
        if code in (pycurl.E_COULDNT_RESOLVE_HOST, pycurl.E_COULDNT_RESOLVE_PROXY):
            return f"connection failed: {message}"
        if code in (pycurl.E_PEER_FAILED_VERIFICATION, pycurl.E_SSL_CACERT):
            return f"TLS error: certificate verify failed: {message}"  # OpenSSL's own words first
        if code in _TLS_ERRORS:
            return f"TLS error: {message}"
        if code in _BROKEN:
            return f"connection broken: {message}"
        return message

    def _timeout_phase(self, message: str, body: _Body) -> str:
        """Which phase a timed-out transfer was in, from libcurl's own words ("Resolving",
        "Connection" or "Operation timed out") and what had arrived. Its timings do not say:
        the connect time is 0 on a connection kept alive from an earlier fetch (a target that
        stopped answering there was "connect timed out"), and on a timeout libcurl 8 fills
        the pretransfer and starttransfer times with the total. Every reason says "timed out"
        (kubernetes.py and people grep for it)."""
        curl = self._curl
        seconds = curl.getinfo(pycurl.TOTAL_TIME)
        if message.startswith("Resolving timed out"):
            return f"name lookup timed out after {seconds:.1f} s"
        if message.startswith("Connection timed out"):
            if curl.getinfo(pycurl.CONNECT_TIME):  # TCP was up: TLS (or a proxy) was not
                return f"TLS handshake timed out after {seconds:.1f} s"
            return f"connect timed out after {seconds:.1f} s"
        if body.size or curl.getinfo(pycurl.RESPONSE_CODE):
            return f"timed out: body stalled at {body.size} bytes after {seconds:.1f} s"
        if message.startswith("Operation timed out"):  # the request was sent
            kept = curl.getinfo(pycurl.NUM_CONNECTS) == 0  # no new connection was made for it
            return f"timed out: no response within {seconds:.1f} s" + (
                " on a kept-alive connection" if kept else ""
            )
        return f"timed out after {seconds:.1f} s ({message})"  # taken off a multi handle at the deadline

    def close(self) -> None:
        with self._state:
            self._closing = True
            if not self._busy:
                self._curl.close()


class Transfer:
    """One GET through an HttpClient's handle, redirects included: `start` readies the handle
    (then perform it, or add it to a CurlMulti), `done` reads the outcome. Shared by the
    blocking fetch and kvops.transport.multi, so both say the same things about a target."""

    def __init__(self, client: HttpClient, url: str) -> None:
        self.client = client
        self.url = url
        self.redirects = 0
        self._body: _Body | None = None

    def start(self, deadline: float) -> None:
        remaining_ms = int((deadline - time.monotonic()) * 1000)
        if remaining_ms <= 0:
            raise FetchError("timed out before connecting")
        client = self.client
        url = _ascii_url(self.url)
        client._claim()
        curl = client.handle
        body = self._body = _Body(client.options.max_body_bytes)
        try:
            curl.setopt(pycurl.URL, url)
            curl.setopt(pycurl.WRITEFUNCTION, body.write)
            curl.setopt(pycurl.TIMEOUT_MS, remaining_ms)  # the whole exchange, trickling bodies too
            curl.setopt(pycurl.CONNECTTIMEOUT_MS, remaining_ms)
            curl.setopt(pycurl.MAXFILESIZE_LARGE, client.options.max_body_bytes)  # a declared size
        except (pycurl.error, ValueError) as exc:  # the handle is not left claimed
            client._release()
            raise FetchError(f"cannot fetch this URL: {one_line(exc)}") from None

    def abandon(self) -> None:
        """Give the handle back without an outcome (a fetch loop that failed half-way)."""
        self.client._release()

    def done(self, error: pycurl.error | None) -> str | None:
        """The body as text; None when a same-origin redirect was taken (start again); or
        FetchError with a one-line reason."""
        client, body = self.client, self._body
        assert body is not None, "done() before start()"
        try:
            if error is not None:
                raise FetchError(client._reason(error, body))
            curl = client.handle
            status = curl.getinfo(pycurl.RESPONSE_CODE)
            if status in _REDIRECTS:
                location = curl.getinfo(pycurl.REDIRECT_URL)
                if location:
                    if not _same_origin(self.url, location):
                        raise FetchError(f"HTTP {status} redirect to another host not followed")
                    self.redirects += 1
                    if self.redirects > _MAX_REDIRECTS:
                        raise FetchError("too many redirects")
                    self.url = location
                    return None
            if not 200 <= status < 300:
                detail = b"".join(body.chunks)[:_ERROR_BODY_BYTES]
                raise FetchError(f"HTTP {status} {_reason(status)}".strip(), status, detail)
        finally:
            client._release()
        chunks = body.chunks
        try:  # a body in one chunk decoded as it is, not copied by a join first
            return (chunks[0] if len(chunks) == 1 else b"".join(chunks)).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise FetchError(f"body is not valid UTF-8 (byte {exc.start})") from None


# What a path or query may keep as it is; anything else is percent-encoded.
_URL_SAFE = "/%:@!$&'()*+,;=-._~?"


def _ascii_url(url: str) -> str:
    """The URL as libcurl takes it, in ASCII: a host in IDNA, a path and query percent-encoded
    (urllib3 did the same before kvops fetched with libcurl). FetchError if it cannot be."""
    if url.isascii() and url.isprintable() and " " not in url:
        return url
    if not url.isprintable():
        raise FetchError("URL holds control characters")
    parts = urlsplit(url)
    try:
        host = (parts.hostname or "").encode("idna").decode("ascii")
    except UnicodeError:
        raise FetchError(f"host {parts.hostname!r} is not a valid international domain name") from None
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, quote(parts.path, _URL_SAFE), quote(parts.query, _URL_SAFE), ""))


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""

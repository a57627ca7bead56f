"""Bounded loopback traffic for a real vLLM: shared prefixes, close repeats, concurrency >= 2.

Prompts are token ids (/v1/completions takes them), so every request's length is exact:
PREFIXES prefixes of PREFIX_TOKENS tokens each, every request one prefix plus a few tokens of its
own. Each prefix is asked for again two requests later (the device cache still holds it: local
hits), and the prefixes rotate, PREFIXES x 4 blocks against 16 device blocks, so a prefix comes
back after the device cache evicted it (an offload tier loads it back). Bounded by a request count
and a deadline, whichever comes first, or by the caller's stop event (without a count: only by
those two).
"""

from __future__ import annotations

import json
import random
import threading
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

PREFIXES = 12
PREFIX_TOKENS = 384  # 3 blocks of 128
SUFFIX_TOKENS = 8
VOCAB = (3, 990)  # token ids of make_model.py's tokenizer, past its special tokens
REQUEST_TIMEOUT = 60.0


@dataclass
class TrafficResult:
    requests: int = 0
    failed: int = 0
    prompt_tokens: int = 0
    errors: list[str] = field(default_factory=list)


def rounds_of(rounds: int | None, seed: int = 0, fresh: int = 0) -> Iterator[list[int]]:
    """The prompts, in order, made as they are sent (rounds=None: without end): prefix i is
    repeated two places after its first use. With `fresh`, each round slides the 12 prefixes by
    that many new ones, so a long run keeps storing (a tier large enough for every prefix stores
    each one once) while the rest still load back."""
    rng = random.Random(seed)

    def prefix() -> list[int]:
        return [rng.randrange(*VOCAB) for _ in range(PREFIX_TOKENS)]

    window = [prefix() for _ in range(PREFIXES)]
    r = 0
    while rounds is None or r < rounds:
        if r and fresh:
            window = window[fresh:] + [prefix() for _ in range(fresh)]
        order: list[int] = []
        for i in range(PREFIXES):
            order.append(i)
            if i >= 2:
                order.append(i - 2)
        order += [PREFIXES - 2, PREFIXES - 1]
        for i in order:
            yield window[i] + [rng.randrange(*VOCAB) for _ in range(SUFFIX_TOKENS)]
        r += 1


def plan(rounds: int, seed: int = 0, fresh: int = 0) -> list[list[int]]:
    """rounds_of as a list."""
    return list(rounds_of(rounds, seed, fresh))


def drive(
    base_url: str,
    model: str,
    rounds: int | None = 2,
    concurrency: int = 2,
    seconds: float = 120.0,
    seed: int = 0,
    fresh: int = 0,
    stop: threading.Event | None = None,
) -> TrafficResult:
    """Send rounds_of(rounds, seed, fresh) with `concurrency` requests in flight; stop at the
    deadline or once `stop` is set (rounds=None: only then)."""
    prompts = rounds_of(rounds, seed, fresh)
    end = time.monotonic() + seconds
    result = TrafficResult()
    lock = threading.Lock()

    def next_prompt() -> list[int] | None:
        if time.monotonic() > end or (stop is not None and stop.is_set()):
            return None
        with lock:  # a generator is not safe to advance from two threads at once
            return next(prompts, None)

    def worker() -> None:
        while (prompt := next_prompt()) is not None:
            body = json.dumps({"model": model, "prompt": prompt, "max_tokens": 2, "temperature": 0}).encode()
            req = urllib.request.Request(
                f"{base_url}/v1/completions", body, {"Content-Type": "application/json"}
            )
            try:
                with urllib.request.urlopen(req, timeout=REQUEST_TIMEOUT) as resp:
                    usage = json.loads(resp.read())["usage"]
                with lock:
                    result.requests += 1
                    result.prompt_tokens += int(usage["prompt_tokens"])
            except Exception as exc:  # reported by the caller, which asserts none failed
                with lock:
                    result.failed += 1
                    result.errors.append(str(exc)[:200])

    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        for running in [pool.submit(worker) for _ in range(concurrency)]:
            running.result()
    return result

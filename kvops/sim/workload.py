"""Workload presets: who sends what, and when, to the simulated engine.

A prompt is a list of (segment id, token count) pieces. Two prompts that start with the same
pieces share a prefix, which is all the prefix cache can see, so the presets differ in how
their prompts share pieces (the use cases of the KV-offloading guides kvops started from):
- chat: multi-turn conversations; each turn re-sends the whole history plus a new message.
- rag: document QA; a shared system prompt, then one of a pool of documents (popular ones
  asked about more often, Zipf), then a question; some sessions ask follow-ups.
- bursty: chat whose arrival rate jumps several-fold for a few seconds every half minute.
- agent: long-context agents; a large tool/context preamble that grows by tool output
  every turn, short think times, many turns.
Everything is drawn from the engine's seeded random.Random, so a run is reproducible.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field, replace

SYSTEM_SEGMENT = 1  # the system prompt every session shares


@dataclass
class Session:
    sid: int
    history: list[tuple[int, int]]  # the pieces a next turn re-sends
    turns_left: int


@dataclass
class Arrival:
    time: float
    segments: list[tuple[int, int]]
    output_len: int
    output_segment: int
    session: Session | None = None
    opens_session: bool = False  # the first request of a session schedules the next session

    @property
    def prompt_len(self) -> int:
        return sum(n for _, n in self.segments)


@dataclass(frozen=True)
class WorkloadSpec:
    name: str
    description: str
    session_rate: float  # new sessions per second (mean)
    system_len: int
    turns: tuple[int, int]
    first_len: tuple[int, int]  # tokens of the first user message (or context preamble)
    turn_len: tuple[int, int]  # tokens added by each later user message or tool result
    output_len: tuple[int, int]
    think_time: float  # mean seconds between a reply and the next turn
    docs: int = 0  # rag: size of the document pool
    doc_len: tuple[int, int] = (0, 0)
    burst_period: float = 0.0  # bursty: seconds between burst starts (0: no bursts)
    burst_length: float = 0.0
    burst_factor: float = 1.0


PRESETS: dict[str, WorkloadSpec] = {
    "chat": WorkloadSpec(
        "chat",
        "multi-turn chat, history re-sent every turn",
        session_rate=1.5,
        system_len=600,
        turns=(2, 10),
        first_len=(50, 400),
        turn_len=(50, 400),
        output_len=(100, 600),
        think_time=8.0,
    ),
    "rag": WorkloadSpec(
        "rag",
        "document QA: shared system prompt + one of a pool of documents + a question",
        session_rate=3.0,
        system_len=300,
        turns=(1, 3),
        first_len=(20, 120),
        turn_len=(20, 120),
        output_len=(50, 300),
        think_time=6.0,
        docs=300,
        doc_len=(1500, 6000),
    ),
    "bursty": WorkloadSpec(
        "bursty",
        "chat with 8x bursts of 6 s every 30 s",
        session_rate=0.6,
        system_len=600,
        turns=(2, 8),
        first_len=(50, 400),
        turn_len=(50, 400),
        output_len=(100, 600),
        think_time=8.0,
        burst_period=30.0,
        burst_length=6.0,
        burst_factor=8.0,
    ),
    "agent": WorkloadSpec(
        "agent",
        "long-context agents: big preamble, tool output appended every turn",
        session_rate=0.25,
        system_len=2000,
        turns=(5, 25),
        first_len=(4000, 24000),
        turn_len=(500, 4000),
        output_len=(50, 400),
        think_time=1.5,
    ),
}


def scaled(spec: WorkloadSpec, rate: float = 1.0, length: float = 1.0) -> WorkloadSpec:
    """The preset with its arrival rate and token lengths multiplied."""

    def s(pair: tuple[int, int]) -> tuple[int, int]:
        return (max(1, round(pair[0] * length)), max(1, round(pair[1] * length)))

    return replace(
        spec,
        session_rate=spec.session_rate * rate,
        system_len=max(1, round(spec.system_len * length)),
        first_len=s(spec.first_len),
        turn_len=s(spec.turn_len),
        output_len=s(spec.output_len),
        doc_len=s(spec.doc_len),
    )


@dataclass
class Workload:
    spec: WorkloadSpec
    _next_segment: int = field(default=SYSTEM_SEGMENT + 1, init=False)
    _next_session: int = field(default=0, init=False)
    _doc_segments: dict[int, tuple[int, int]] = field(default_factory=dict, init=False)

    def _segment(self) -> int:
        self._next_segment += 1
        return self._next_segment

    def _rate(self, t: float) -> float:
        spec = self.spec
        if spec.burst_period > 0 and (t % spec.burst_period) < spec.burst_length:
            return spec.session_rate * spec.burst_factor
        return spec.session_rate

    def _doc(self, rng: random.Random) -> tuple[int, int]:
        """A document piece; popular documents (low index) are drawn more often (Zipf ~1)."""
        spec = self.spec
        idx = min(int(math.exp(rng.random() * math.log(spec.docs + 1))) - 1, spec.docs - 1)
        if idx not in self._doc_segments:
            # Each document's length is fixed by its index, independent of draw order.
            doc_rng = random.Random(idx * 7919 + 17)
            self._doc_segments[idx] = (-(idx + 2), doc_rng.randint(*spec.doc_len))
        return self._doc_segments[idx]

    def _open(self, t: float, rng: random.Random) -> Arrival:
        spec = self.spec
        self._next_session += 1
        history: list[tuple[int, int]] = [(SYSTEM_SEGMENT, spec.system_len)]
        if spec.docs:
            history.append(self._doc(rng))
        history.append((self._segment(), rng.randint(*spec.first_len)))
        session = Session(self._next_session, history, rng.randint(*spec.turns) - 1)
        return Arrival(
            time=t,
            segments=list(history),
            output_len=rng.randint(*spec.output_len),
            output_segment=self._segment(),
            session=session,
            opens_session=True,
        )

    def start(self, rng: random.Random) -> list[Arrival]:
        # The first session arrives at once, so a fresh simulator shows traffic immediately.
        return [self._open(0.0, rng)]

    def on_arrival(self, arrival: Arrival, rng: random.Random) -> list[Arrival]:
        """When a session opens, draw when the next one opens (Poisson, possibly bursty)."""
        if not arrival.opens_session:
            return []
        gap = rng.expovariate(self._rate(arrival.time))
        return [self._open(arrival.time + gap, rng)]

    def on_finish(self, arrival: Arrival, now: float, rng: random.Random) -> list[Arrival]:
        """A reply finished: the session's next turn re-sends history + reply + a new message."""
        session = arrival.session
        if session is None or session.turns_left <= 0:
            return []
        session.turns_left -= 1
        session.history = [
            *arrival.segments,
            (arrival.output_segment, arrival.output_len),
            (self._segment(), rng.randint(*self.spec.turn_len)),
        ]
        return [
            Arrival(
                time=now + rng.expovariate(1.0 / self.spec.think_time),
                segments=list(session.history),
                output_len=rng.randint(*self.spec.output_len),
                output_segment=self._segment(),
                session=session,
            )
        ]

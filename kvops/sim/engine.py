"""The simulated vLLM engine: GPU KV blocks with prefix caching, a CPU offload tier, a scheduler.

What is modelled, after vLLM v1 (kv_cache_manager, block_pool, scheduler, OffloadingConnector):
- A request's tokens are split into blocks of `block_size`; a full block is identified by a
  hash chained over its content and its prefix, so equal prefixes give equal block keys.
- GPU blocks are free, in use (ref-counted), or cached and unreferenced; the cached ones sit
  in an LRU and are evicted only when a free block is needed. Usage is what vLLM reports:
  1 - (free + evictable) / total.
- Admission looks up the longest prefix of full blocks on the GPU (local hit), then the
  following blocks in the CPU tier (external hit, loaded at `load_bandwidth`).
- Newly full blocks are stored to the CPU tier (`store_bandwidth`), which holds at most
  `kv_offloading_size` bytes in blocks of `bytes_per_block` and evicts least recently used.
- Decode needs a new block every `block_size` tokens; when none is left the most recently
  admitted running request is preempted and recomputed later (vLLM's RECOMPUTE policy).
Time is simulated: a step lasts a few ms plus a per-token prefill cost, so the clock can run
faster or slower than the wall clock (what-if runs as fast as the CPU allows).
"""

from __future__ import annotations

import heapq
import math
import random
from collections import OrderedDict, deque
from dataclasses import dataclass, field

from kvops.sim.offload_paths import FS, FS_CAPACITY_FACTOR, PRIMARY, FsTier, SimpleCounters
from kvops.sim.workload import Arrival, Workload
from kvops.units import GIB

# Llama-3.1-8B at bf16: 32 layers x 8 KV heads x 128 dims x 2 (K and V) x 2 bytes.
DEFAULT_KV_BYTES_PER_TOKEN = 131072
# PCIe Gen5 x16, one direction (docs/research/hardware.md §1.5); DMA reaches a fraction of it.
DEFAULT_LINK_BYTES_PER_SECOND = 63.0e9
STORE_EFFICIENCY = 0.5
LOAD_EFFICIENCY = 0.6


@dataclass
class SimConfig:
    """One simulated vLLM instance (one engine). Defaults: Llama-3.1-8B bf16 on a mid-size GPU."""

    model_name: str = "meta-llama/Llama-3.1-8B-Instruct"
    kv_bytes_per_token: int = DEFAULT_KV_BYTES_PER_TOKEN
    block_size: int = 16
    num_gpu_blocks: int = 8192
    kv_offloading_size_gib: float | None = 64.0  # None: no offloading connector at all
    max_num_seqs: int = 256
    max_num_batched_tokens: int = 8192
    max_model_len: int = 131072
    link_bytes_per_second: float = DEFAULT_LINK_BYTES_PER_SECOND
    # Which offload connector runs the CPU tier (kvops/sim/offload_paths.py): vLLM's
    # OffloadingConnector ("native"), its SimpleCPUOffloadConnector, or multi-tier offloading.
    offload_path: str = "native"

    @property
    def bytes_per_block(self) -> int:
        return self.kv_bytes_per_token * self.block_size

    @property
    def offload(self) -> bool:
        return self.kv_offloading_size_gib is not None

    @property
    def cpu_bytes(self) -> int:
        return int((self.kv_offloading_size_gib or 0.0) * GIB)

    @property
    def num_cpu_blocks(self) -> int:
        # vLLM's CPUOffloadingSpec: num_chunks = cpu_bytes_to_use // bytes per chunk (1 block/chunk).
        return self.cpu_bytes // self.bytes_per_block


class Histogram:
    """Cumulative-bucket histogram with the bounds vLLM uses for the family."""

    __slots__ = ("bounds", "count", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # per bucket, last is +Inf
        self.count = 0
        self.sum = 0.0

    def observe(self, value: float, n: int = 1) -> None:
        i = 0
        bounds = self.bounds
        while i < len(bounds) and value > bounds[i]:
            i += 1
        self.counts[i] += n
        self.count += n
        self.sum += value * n

    def cumulative(self) -> list[int]:
        out, acc = [], 0
        for c in self.counts:
            acc += c
            out.append(acc)
        return out


def block_keys(segments: list[tuple[int, int]], block_size: int) -> list[int]:
    """Keys of the full blocks of a token stream made of (segment id, length) pieces.

    Like vLLM's block hash, a key covers the block's content and its parent's key, so two
    streams share a key exactly as long as they share the whole prefix.
    """
    keys: list[int] = []
    parent = 0
    pieces: list[tuple[int, int, int]] = []
    filled = 0
    for seg_id, length in segments:
        off = 0
        while off < length:
            take = min(block_size - filled, length - off)
            pieces.append((seg_id, off, off + take))
            filled += take
            off += take
            if filled == block_size:
                parent = hash((parent, tuple(pieces)))
                keys.append(parent)
                pieces = []
                filled = 0
    return keys


@dataclass(eq=False)
class Request:
    rid: int
    arrival: Arrival
    keys: list[int]  # full-block keys of prompt + the whole output
    prompt_len: int
    output_len: int
    computed: int = 0  # tokens whose KV is on the GPU
    generated: int = 0
    held: list[int] = field(default_factory=list)  # hashed GPU blocks this request references
    unhashed: int = 0  # GPU blocks held that are not (yet) full and hashed
    num_preemptions: int = 0
    prefilling: bool = False
    running: bool = False
    scheduled_at: float | None = None
    first_token_at: float | None = None

    @property
    def length(self) -> int:
        return self.prompt_len + self.generated


@dataclass
class Counters:
    """Cumulative counters, named after what vLLM exposes (tokens, bytes, seconds)."""

    prefix_queries: int = 0
    prefix_hits: int = 0
    external_queries: int = 0  # vLLM >= 0.11.2 semantics: tokens not found locally
    external_queries_whole_prompt: int = 0  # vLLM 0.11.x semantics: the whole prompt
    external_hits: int = 0
    store_bytes: int = 0
    store_seconds: float = 0.0
    store_jobs: int = 0
    load_bytes: int = 0
    load_seconds: float = 0.0
    load_jobs: int = 0
    allocation_failures: int = 0
    preemptions: int = 0
    recomputed_tokens: int = 0  # tokens prefilled again after a preemption
    prompt_tokens: int = 0
    prompt_local_compute: int = 0
    prompt_local_cache_hit: int = 0
    prompt_external: int = 0
    generation_tokens: int = 0
    requests_finished: int = 0
    lookups: int = 0
    steps: int = 0
    rejected: int = 0  # requests longer than the model or the whole GPU cache


class Engine:
    """One engine's state, advanced step by step to a simulated time."""

    def __init__(
        self,
        config: SimConfig,
        workload: Workload,
        seed: int = 0,
        histogram_bounds: dict[str, tuple[float, ...]] | None = None,
    ) -> None:
        self.config = config
        self.workload = workload
        self.rng = random.Random(seed)
        self.clock = 0.0
        self.counters = Counters()
        # Simulated times (engine clock) at which lazily created series first got a value.
        self.first_seen: dict[str, float] = {}
        self.hist = {name: Histogram(b) for name, b in (histogram_bounds or {}).items()}
        self.bounds = histogram_bounds or {}
        # The other offload paths' counts (kvops/sim/offload_paths.py)
        self.simple = SimpleCounters()
        self.fs: FsTier | None = None
        if config.offload and config.offload_path == "tiering":
            self.fs = FsTier(config.num_cpu_blocks * FS_CAPACITY_FACTOR, config.bytes_per_block)
        # Histograms with labels (tiering: per tier, and per result): (family, labels) -> histogram
        self.labelled_hist: dict[tuple[str, tuple[tuple[str, str], ...]], Histogram] = {}
        # GPU block pool
        self.gpu_cached: dict[int, int] = {}  # key -> reference count
        self.gpu_lru: OrderedDict[int, None] = OrderedDict()  # cached, unreferenced, oldest first
        self.gpu_unhashed = 0
        # CPU tier: resident keys, least recently used first
        self.cpu: OrderedDict[int, None] = OrderedDict()
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []
        self._arrivals: list[tuple[float, int, Arrival]] = []
        self._seq = 0
        self._rid = 0
        self._freed = 0  # bumps whenever blocks are released (admission may now succeed)
        self._blocked: tuple[int, int] | None = None
        for arrival in workload.start(self.rng):
            self._push(arrival)

    # ---- block pool -------------------------------------------------------------------
    @property
    def max_request_tokens(self) -> int:
        cfg = self.config
        return min(cfg.max_model_len, cfg.num_gpu_blocks * cfg.block_size)

    @property
    def free_blocks(self) -> int:
        return self.config.num_gpu_blocks - len(self.gpu_cached) - self.gpu_unhashed

    @property
    def kv_cache_usage(self) -> float:
        total = self.config.num_gpu_blocks
        return (total - self.free_blocks - len(self.gpu_lru)) / total

    def _allocate(self, n: int) -> None:
        """Take n blocks (caller checked availability): free ones first, then evict LRU."""
        take_free = min(n, self.free_blocks)
        for _ in range(n - take_free):
            key, _ = self.gpu_lru.popitem(last=False)
            del self.gpu_cached[key]
        self.gpu_unhashed += n

    def _hash_block(self, req: Request, key: int) -> None:
        """A block of req became full: it gets its key, or joins an identical cached block."""
        req.unhashed -= 1
        self.gpu_unhashed -= 1
        refs = self.gpu_cached.get(key)
        if refs is None:
            self.gpu_cached[key] = 1
        else:
            if refs == 0:
                del self.gpu_lru[key]
            self.gpu_cached[key] = refs + 1
        req.held.append(key)

    def _release(self, req: Request) -> None:
        # vLLM frees a request's blocks tail first, so its tail is evicted before its prefix.
        for key in reversed(req.held):
            refs = self.gpu_cached[key] - 1
            self.gpu_cached[key] = refs
            if refs == 0:
                self.gpu_lru[key] = None
        self.gpu_unhashed -= req.unhashed
        req.held = []
        req.unhashed = 0
        self._freed += 1

    # ---- CPU tier ---------------------------------------------------------------------
    def _store(self, keys: list[int]) -> None:
        """Store newly full GPU blocks to the CPU tier as one transfer job."""
        new = [k for k in keys if k not in self.cpu]
        self._simple_outcome("skipped_already_cached", len(keys) - len(new))
        if not new:
            return
        capacity = self.config.num_cpu_blocks
        if capacity == 0:
            self.counters.allocation_failures += 1
            self._seen("allocation_failure")
            return
        for k in new:
            if len(self.cpu) >= capacity:
                self.cpu.popitem(last=False)
            self.cpu[k] = None
        nbytes = len(new) * self.config.bytes_per_block
        seconds = nbytes / (self.config.link_bytes_per_second * STORE_EFFICIENCY * self._jitter())
        c = self.counters
        c.store_bytes += nbytes
        c.store_seconds += seconds
        c.store_jobs += 1
        self._seen("store")
        self._observe("vllm:kv_offload_store_size", nbytes)
        self._observe("vllm:kv_offload_cpu_allocation_size", len(new))
        self._simple_outcome("stored", len(new))
        if self.fs is not None:
            self.fs.cascade(new)

    def _load(self, keys: list[int]) -> None:
        for k in keys:
            self.cpu.move_to_end(k)
        nbytes = len(keys) * self.config.bytes_per_block
        seconds = nbytes / (self.config.link_bytes_per_second * LOAD_EFFICIENCY * self._jitter())
        c = self.counters
        c.load_bytes += nbytes
        c.load_seconds += seconds
        c.load_jobs += 1
        self._seen("load")
        self._observe("vllm:kv_offload_load_size", nbytes)
        self.simple.load_blocks += len(keys)

    def _simple_outcome(self, outcome: str, blocks: int) -> None:
        if blocks > 0:
            self.simple.outcomes[outcome] = self.simple.outcomes.get(outcome, 0) + blocks

    def _promote(self, req: Request, local: int, external: int, limit: int) -> int:
        """Tiering: count the lookup per tier and promote the fs run into the primary. Returns
        how many blocks after the primary's run are now in the primary (0 if none or failed)."""
        assert self.fs is not None
        start = local + external
        queried = min(limit - local, external + 1)  # the primary is asked up to its first miss
        room = max(0, self.config.num_cpu_blocks - external)  # promoted blocks land beside the hits
        found = self.fs.lookup(external, queried, req.keys[start : min(limit, start + room)])
        self._observe_labelled("vllm:kv_offload_tiering_lookup_sync_delay_seconds", (("tier", PRIMARY),),
                               2e-5 + 2e-8 * queried)  # fmt: skip
        if limit > start:
            self._observe_labelled("vllm:kv_offload_tiering_lookup_sync_delay_seconds", (("tier", FS),),
                                   5e-4 + 1e-6 * (limit - start))  # fmt: skip
        for result, seconds in self.fs.promotion_latency:
            self._observe_labelled(
                "vllm:kv_offload_tiering_promotion_latency_seconds",
                (("result", result), ("tier", FS)),
                seconds,
            )
        self.fs.promotion_latency.clear()
        for key in req.keys[local:start]:  # the primary's own hits stay while promoted blocks land
            self.cpu.move_to_end(key)
        capacity = self.config.num_cpu_blocks
        for key in found:  # promoted: now resident in the primary, most recently used
            if key not in self.cpu and len(self.cpu) >= capacity:
                self.cpu.popitem(last=False)
            self.cpu[key] = None
        return len(found)

    def _observe_labelled(self, name: str, labels: tuple[tuple[str, str], ...], value: float) -> None:
        bounds = self.bounds.get(name)
        if bounds is None:
            return
        hist = self.labelled_hist.get((name, labels))
        if hist is None:
            hist = self.labelled_hist[(name, labels)] = Histogram(bounds)
        hist.observe(value)

    def _jitter(self) -> float:
        return self.rng.uniform(0.9, 1.1)

    # ---- bookkeeping helpers ----------------------------------------------------------
    def _seen(self, what: str) -> None:
        if what not in self.first_seen:
            self.first_seen[what] = self.clock

    def _observe(self, name: str, value: float, n: int = 1) -> None:
        h = self.hist.get(name)
        if h is not None:
            h.observe(value, n)

    def _push(self, arrival: Arrival) -> None:
        heapq.heappush(self._arrivals, (arrival.time, self._seq, arrival))
        self._seq += 1

    # ---- the scheduler ----------------------------------------------------------------
    def advance_to(self, t: float, max_steps: int | None = None) -> int:
        """Run steps until the simulated clock reaches t; returns the number of steps run."""
        steps = 0
        while self.clock < t and (max_steps is None or steps < max_steps):
            if not self.running and not self.waiting:
                # Idle: jump to the next arrival instead of spinning empty steps.
                if not self._arrivals or self._arrivals[0][0] > t:
                    self.clock = t
                    break
                self.clock = max(self.clock, self._arrivals[0][0])
            self.step()
            steps += 1
        return steps

    def step(self) -> None:
        """One engine iteration: arrivals queue, the scheduler picks (running requests first,
        then waiting ones in order), the batch runs, finished requests leave."""
        now = self.clock
        self._queue_arrivals(now)
        budget = self.config.max_num_batched_tokens
        scheduled: list[tuple[Request, int]] = []  # (request, prefill tokens this step)
        decoding: list[Request] = []
        budget = self._schedule_running(budget, scheduled, decoding)
        self._admit_waiting(budget, scheduled)
        self.clock = self._execute(now, scheduled, decoding)
        self.counters.steps += 1
        for req in [r for r in self.running if r.generated >= r.output_len]:
            self._finish(req)

    def _queue_arrivals(self, now: float) -> None:
        while self._arrivals and self._arrivals[0][0] <= now:
            _, _, arrival = heapq.heappop(self._arrivals)
            for later in self.workload.on_arrival(arrival, self.rng):
                self._push(later)
            if arrival.prompt_len + arrival.output_len > self.max_request_tokens:
                # vLLM rejects a prompt beyond max_model_len (HTTP 400); the session ends.
                self.counters.rejected += 1
                continue
            self.waiting.append(self._new_request(arrival))

    def _schedule_running(
        self, budget: int, scheduled: list[tuple[Request, int]], decoding: list[Request]
    ) -> int:
        """Running requests first: continue a chunked prefill, or decode one token (preempting
        the newest requests where blocks run out). Returns the token budget left."""
        bs = self.config.block_size
        for req in list(self.running):
            if not req.running:
                continue  # preempted earlier in this loop
            if req.prefilling:
                n = min(req.length - req.computed, budget)
                if n > 0:
                    scheduled.append((req, n))
                    budget -= n
                continue
            if budget <= 0:
                continue
            # This step writes the KV of the newest token: room for `length` tokens is needed.
            need = math.ceil(req.length / bs) - (len(req.held) + req.unhashed)
            while need > 0 and self.free_blocks + len(self.gpu_lru) < need:
                victim = self.running[-1]
                self._preempt(victim)
                if victim is req:
                    break
            if not req.running:
                continue
            if need > 0:
                self._allocate(need)
                req.unhashed += need
            decoding.append(req)
            budget -= 1
        return budget

    def _admit_waiting(self, budget: int, scheduled: list[tuple[Request, int]]) -> None:
        """Waiting requests in order while blocks, sequences and budget allow."""
        while self.waiting and budget > 0 and len(self.running) < self.config.max_num_seqs:
            req = self.waiting[0]
            if self._blocked == (req.rid, self._freed):
                break  # it did not fit, and no block has been freed since
            admitted = self._admit(req, budget)
            if admitted is None:
                self._blocked = (req.rid, self._freed)
                break
            self.waiting.popleft()
            self.running.append(req)
            req.running = True
            if admitted > 0:
                scheduled.append((req, admitted))
                budget -= admitted

    def _execute(self, now: float, scheduled: list[tuple[Request, int]], decoding: list[Request]) -> float:
        """Prefill chunks, decode tokens; hash blocks that became full; store them. Returns
        the time the step ends."""
        cfg = self.config
        prefill_tokens = sum(n for _, n in scheduled)
        dt = 0.012 + 1.2e-5 * prefill_tokens + 6e-5 * len(decoding)
        end = now + dt
        sampled = len(decoding)
        for req, n in scheduled:
            if not req.running:
                continue  # cannot happen today (victims come after the scheduled), kept safe
            before = req.computed
            req.computed += n
            new_keys = self._fill_blocks(req, before, req.computed)
            if new_keys and cfg.offload:
                self._store(new_keys)
            if req.computed >= req.length:
                # The step that ends a prefill (or a recompute) also samples the next token.
                req.prefilling = False
                req.generated += 1
                req.computed = req.length - 1
                sampled += 1
                if req.first_token_at is None:
                    req.first_token_at = end
                    self._observe("vllm:time_to_first_token_seconds", end - req.arrival.time)
        for req in decoding:
            before = req.computed
            req.generated += 1
            req.computed = after = before + 1  # the newest token's KV is written next step
            if after % cfg.block_size == 0:  # a block just became full
                new_keys = self._fill_blocks(req, before, after)
                if new_keys and cfg.offload:
                    self._store(new_keys)
        self.counters.generation_tokens += sampled
        if decoding:
            self._observe("vllm:inter_token_latency_seconds", dt, len(decoding))
            self._observe("vllm:time_per_output_token_seconds", dt, len(decoding))
        self._observe("vllm:iteration_tokens_total", prefill_tokens + len(decoding))
        return end

    def _fill_blocks(self, req: Request, before: int, after: int) -> list[int]:
        """Hash the blocks that became full between token counts before and after."""
        bs = self.config.block_size
        first, last = before // bs, min(after // bs, len(req.keys))
        keys = req.keys[first:last]
        for key in keys:
            self._hash_block(req, key)
        return keys

    def _new_request(self, arrival: Arrival) -> Request:
        self._rid += 1
        segments = [*arrival.segments, (arrival.output_segment, arrival.output_len)]
        return Request(
            rid=self._rid,
            arrival=arrival,
            keys=block_keys(segments, self.config.block_size),
            prompt_len=arrival.prompt_len,
            output_len=arrival.output_len,
        )

    def _admit(self, req: Request, budget: int) -> int | None:
        """Look up, allocate and load; None if the GPU has no room (the request waits)."""
        cfg = self.config
        bs = cfg.block_size
        length = req.length
        # The last token is always computed, so at most (length - 1) // bs blocks can hit.
        limit = min((length - 1) // bs, len(req.keys))
        local = 0
        while local < limit and req.keys[local] in self.gpu_cached:
            local += 1
        external = 0
        if cfg.offload:
            while local + external < limit and req.keys[local + external] in self.cpu:
                external += 1
        hit_keys = req.keys[:local]
        in_lru = sum(1 for k in hit_keys if self.gpu_cached[k] == 0)
        need = math.ceil(length / bs) - local
        if need > self.free_blocks + len(self.gpu_lru) - in_lru:
            return None
        if self.fs is not None and req.num_preemptions == 0:  # admitted: the lookup runs on
            external += self._promote(req, local, external, limit)
        for key in hit_keys:
            refs = self.gpu_cached[key]
            if refs == 0:
                del self.gpu_lru[key]
            self.gpu_cached[key] = refs + 1
        req.held = list(hit_keys)
        self._allocate(need)
        req.unhashed = need
        ext_keys = req.keys[local : local + external]
        if external:
            self._load(ext_keys)
            for key in ext_keys:
                self._hash_block(req, key)
        req.computed = (local + external) * bs
        req.prefilling = True
        c = self.counters
        first_admission = req.num_preemptions == 0
        if first_admission:
            # vLLM counts preempted requests' lookups apart; they do not feed the hit rates.
            c.prefix_queries += length
            c.prefix_hits += local * bs
            c.prompt_tokens += length
            c.prompt_local_cache_hit += local * bs
            c.prompt_external += external * bs
            c.prompt_local_compute += length - (local + external) * bs
            if cfg.offload:
                c.external_queries += length - local * bs
                c.external_queries_whole_prompt += length
                c.external_hits += external * bs
                c.lookups += 1
                self._seen("lookup")
                self._observe("vllm:kv_offload_lookup_sync_delay_seconds", 2e-5 + 2e-8 * length)
            req.scheduled_at = self.clock
            self._observe("vllm:request_queue_time_seconds", self.clock - req.arrival.time)
            self._observe("vllm:request_prefill_kv_computed_tokens", length - (local + external) * bs)
        else:
            c.recomputed_tokens += length - (local + external) * bs
        return min(length - req.computed, budget)

    def _preempt(self, req: Request) -> None:
        self.running.remove(req)
        req.running = False
        self._release(req)
        req.computed = 0
        req.num_preemptions += 1
        self.counters.preemptions += 1
        self.waiting.appendleft(req)

    def _finish(self, req: Request) -> None:
        self.running.remove(req)
        req.running = False
        self._release(req)
        c = self.counters
        c.requests_finished += 1
        now = self.clock
        first = req.first_token_at if req.first_token_at is not None else now
        sched = req.scheduled_at if req.scheduled_at is not None else req.arrival.time
        for name, value in (
            ("vllm:e2e_request_latency_seconds", now - req.arrival.time),
            ("vllm:request_inference_time_seconds", now - sched),
            ("vllm:request_prefill_time_seconds", first - sched),
            ("vllm:request_decode_time_seconds", now - first),
            ("vllm:request_time_per_output_token_seconds", (now - first) / max(req.generated - 1, 1)),
            ("vllm:request_prompt_tokens", req.prompt_len),
            ("vllm:request_generation_tokens", req.generated),
            ("vllm:request_max_num_generation_tokens", req.output_len),
            ("vllm:request_params_max_tokens", req.output_len),
            ("vllm:request_params_n", 1),
            ("vllm:request_num_preemptions", req.num_preemptions),
        ):
            self._observe(name, value)
        for arrival in self.workload.on_finish(req.arrival, now, self.rng):
            self._push(arrival)

    # ---- invariants (used by tests) ----------------------------------------------------
    def check(self) -> None:
        """Raise AssertionError if the block accounting is inconsistent."""
        cfg = self.config
        assert self.free_blocks >= 0, "more GPU blocks in use than exist"
        assert len(self.cpu) <= cfg.num_cpu_blocks, "CPU tier above its size"
        refs: dict[int, int] = {}
        unhashed = 0
        for req in self.running:
            for k in req.held:
                refs[k] = refs.get(k, 0) + 1
            unhashed += req.unhashed
        assert unhashed == self.gpu_unhashed, "unhashed GPU blocks not conserved"
        for k, n in self.gpu_cached.items():
            assert refs.get(k, 0) == n, "GPU block reference count drifted"
            assert (n == 0) == (k in self.gpu_lru), "evictable set out of step with ref counts"
        c = self.counters
        assert c.prefix_hits <= c.prefix_queries
        assert c.external_hits <= c.external_queries

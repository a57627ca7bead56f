"""NOT STOCK vLLM: vLLM's CPU offloading spec made to run on vLLM's CPU platform, for tests.

vLLM 0.32.0 refuses KV offloading on the CPU platform (vllm/v1/kv_offload/cpu/spec.py,
CPUOffloadingSpec.get_worker: "CPU Offloading is currently only supported on CUDA-alike and XPU
GPUs"). Everything above the worker is platform-independent: the scheduler-side manager, the copy
plans, the byte counts, the connector's stats and the Prometheus metrics. This module keeps all of
it and replaces only the device primitives, so a CPU-only machine runs vLLM's own offloading path.

Loaded by vLLM's OffloadingConnector through its own option (docs/dev/real-vllm-harness.md):
    --kv-transfer-config '{"kv_connector": "OffloadingConnector", "kv_role": "kv_both",
      "kv_connector_extra_config": {"spec_name": "HostCopyCPUOffloadingSpec",
      "spec_module_path": "kvops_host_offload", "cpu_bytes_to_use": ...}}'

What differs from vLLM 0.32.0, every line of it:
1. HostCopyCPUOffloadingSpec(CPUOffloadingSpec) overrides two methods:
   - get_worker: vLLM's body without its platform check (the `if not (current_platform.
     is_cuda_alike() or current_platform.is_xpu()): raise Exception(...)` lines);
   - create_worker: builds the worker below with mmap_region=None, which is what vLLM's own
     create_worker does on a platform without the shared region (_uses_shared_region() is
     False off CUDA/XPU), minus the cleanup of a region that is never made.
2. The worker is vLLM's own vllm/v1/kv_offload/cpu/gpu_worker.py, read from the installed
   release and executed as a private module with these exact text replacements (each must
   match the stated number of times, so another release fails loudly instead of silently):
   - `assert gpu_tensor.is_cuda or gpu_tensor.is_xpu` -> `assert gpu_tensor.device.type == "cpu"`
     (on the CPU platform the "device" KV cache is host memory);
   - `current_platform.Stream()` -> `_HostStream()` (a CUDA stream -> a no-op object);
   - `torch.Event(enable_timing=True)` (2x) -> `_HostEvent()` (a CUDA event -> a wall-clock stamp);
   - `stream.wait_stream(current_platform.current_stream())` -> `stream.wait_stream(None)`;
   - `with current_platform.stream(stream):` -> `with _host_stream(stream):` (a null context).
   and one name rebound in that private module: `_select_swap_blocks_fn` returns
   host_swap_blocks_batch, a memmove over vLLM's own (source, destination, size) copy list,
   instead of the batched device-copy kernel (ops.swap_blocks_batch / the Triton kernel).
3. HostCopyTieringOffloadingSpec(TieringOffloadingSpec) (vLLM's multi-tier spec: CPU primary tier,
   secondary tiers such as "fs"), for item 6 of issue 26: get_worker as in 1.; create_worker is
   vLLM's TieringOffloadingSpec.create_worker with the worker above in place of vLLM's
   CPUOffloadingWorker (the shared mmap region is kept: tiering always uses it).
Copies are synchronous, so submission order is completion order (what the streams and events
enforced), every event is complete when queried, and a transfer's time is the memmove's wall time.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.util
import sys
import time
from typing import Any

from vllm.v1.kv_offload.cpu import gpu_worker as _vllm_worker
from vllm.v1.kv_offload.cpu.shared_offload_region import SharedOffloadRegion
from vllm.v1.kv_offload.cpu.spec import CPUOffloadingSpec
from vllm.v1.kv_offload.tiering.spec import TieringOffloadingSpec

# (vLLM's text, replacement, times it must occur): the whole change to vLLM's worker.
REPLACEMENTS: tuple[tuple[str, str, int], ...] = (
    ("assert gpu_tensor.is_cuda or gpu_tensor.is_xpu", 'assert gpu_tensor.device.type == "cpu"', 1),
    ("current_platform.Stream()", "_HostStream()", 1),
    ("torch.Event(enable_timing=True)", "_HostEvent()", 2),
    ("stream.wait_stream(current_platform.current_stream())", "stream.wait_stream(None)", 1),
    ("with current_platform.stream(stream):", "with _host_stream(stream):", 1),
)


class _HostStream:
    """Stands in for a CUDA stream: host copies run in submission order already."""

    def wait_stream(self, other: Any) -> None:
        pass

    def wait_event(self, event: Any) -> None:
        pass


class _HostEvent:
    """Stands in for a timing CUDA event: a perf_counter stamp, complete once recorded."""

    def __init__(self) -> None:
        self.at = 0.0

    def record(self, stream: Any = None) -> None:
        self.at = time.perf_counter()

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        pass

    def elapsed_time(self, end: _HostEvent) -> float:
        return (end.at - self.at) * 1e3  # milliseconds, as torch.Event.elapsed_time


def _host_stream(stream: Any) -> contextlib.AbstractContextManager[None]:
    return contextlib.nullcontext()


def host_swap_blocks_batch(src: Any, dst: Any, sizes: Any, is_src_access_order_any: bool = False) -> None:
    """vLLM's batched copy, on the host: one memmove per (source, destination, size) entry."""
    for source, destination, size in zip(src.tolist(), dst.tolist(), sizes.tolist(), strict=True):
        ctypes.memmove(destination, source, size)


def _load_host_worker_module() -> Any:
    path = _vllm_worker.__file__
    with open(path, encoding="utf-8") as f:
        text = f.read()
    for old, new, times in REPLACEMENTS:
        found = text.count(old)
        if found != times:
            raise RuntimeError(
                f"{path}: {old!r} occurs {found} times, expected {times}: not vLLM 0.32.0's worker"
            )
        text = text.replace(old, new)
    name = "kvops_host_offload_worker"
    spec = importlib.util.spec_from_loader(name, loader=None, origin=path)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    module.__dict__.update(_HostStream=_HostStream, _HostEvent=_HostEvent, _host_stream=_host_stream)
    sys.modules[name] = module
    exec(compile(text, path, "exec"), module.__dict__)
    module._select_swap_blocks_fn = lambda *args, **kwargs: host_swap_blocks_batch
    return module


_host_worker = _load_host_worker_module()


class HostCopyCPUOffloadingSpec(CPUOffloadingSpec):
    """vLLM's CPUOffloadingSpec with the worker above (NOT STOCK vLLM: see the module docstring)."""

    def create_worker(self, kv_caches: Any) -> Any:
        return _host_worker.CPUOffloadingWorker(
            kv_caches=kv_caches,
            blocks_per_chunk=self.blocks_per_chunk,
            num_cpu_chunks=self.num_chunks,
            mmap_region=None,
        )

    def get_worker(self, kv_caches: Any) -> Any:
        if not self._worker:
            self._worker = self.create_worker(kv_caches)
        assert self._worker is not None
        return self._worker


class HostCopyTieringOffloadingSpec(TieringOffloadingSpec):
    """vLLM's TieringOffloadingSpec with the worker above (NOT STOCK vLLM: module docstring, 3.)."""

    def create_worker(self, kv_caches: Any) -> Any:
        rank = 0 if self.replicated_layout else self.config.parallel.rank
        worker_mmap = SharedOffloadRegion(
            engine_id=self._engine_id,
            num_chunks=self.num_chunks,
            rank=rank,
            kv_bytes_per_chunk=self.kv_bytes_per_chunk,
            cpu_page_size=self.cpu_page_size_per_worker,
        )
        try:
            if self.config.canonical_layout:
                self._validate_canonical_refs(kv_caches)
            return _host_worker.CPUOffloadingWorker(
                kv_caches=kv_caches,
                blocks_per_chunk=self.blocks_per_chunk,
                num_cpu_chunks=self.num_chunks,
                mmap_region=worker_mmap,
                canonical_layout=self.config.canonical_layout,
            )
        except Exception:
            worker_mmap.cleanup()
            raise

    get_worker = HostCopyCPUOffloadingSpec.get_worker

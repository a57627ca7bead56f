"""The reproductions that run a vLLM release's own code on CPU (child process side).

`python -m kvops.doctor.repro_cases` reads one request (JSON) on stdin, puts the release on
sys.path (kvops.doctor.release_sandbox), runs the case's function and prints one JSON result
after RESULT_MARK on stdout (vLLM's own logger also writes to stdout).

A case returns what ran: the release's file and function, the outcome, vLLM's own traceback
(only the frames inside the release), and every stand-in used, so a reader can tell a
reproduction from a printout.
"""

from __future__ import annotations

import json
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from kvops.doctor import release_sandbox as sandbox

RESULT_MARK = "@@kvops-repro-result@@"

# Where each release keeps the offloading connector's layer lookup, newest layout first:
# 0.12-0.18 OffloadingConnectorWorker.register_kv_caches; 0.11.x delegated it to the CPU spec.
LOOKUP_FUNCTIONS = (
    (
        "distributed/kv_transfer/kv_connector/v1/offloading/worker.py",
        "OffloadingConnectorWorker.register_kv_caches",
    ),
    (
        "distributed/kv_transfer/kv_connector/v1/offloading_connector.py",
        "OffloadingConnectorWorker.register_kv_caches",
    ),
    ("v1/kv_offload/cpu.py", "CPUOffloadingSpec.get_handlers"),
)


class GpuBackendStandIn:
    """The attention backend a GPU platform would pick for an MLA layer at start-up (needs a GPU)."""


class _OffloadWorkerStandIn:
    """State of OffloadingConnectorWorker / CPUOffloadingSpec that the lookup reads.

    The transfer handlers it would build next need CUDA streams and pinned memory: they are
    replaced by recorders of what the lookup handed them.
    """

    def __init__(self, vllm_config: Any) -> None:
        self.spec = SimpleNamespace(vllm_config=vllm_config)
        self.vllm_config = vllm_config
        self._handler = None
        self.gpu_block_size = 64
        self.offloaded_block_size = 64
        self.num_cpu_blocks = 1
        self.handed: dict[str, Any] | None = None

    def _register_handlers(self, kv_caches: dict[str, Any], attn_backends: dict[str, Any]) -> None:
        self.handed = attn_backends


def offload_layer_lookup(root: Path, request: dict[str, Any]) -> dict[str, Any]:
    """mla-indexer-keyerror: the release's offloading layer lookup over the model's attention layers."""
    import torch

    found = None
    for rel, qualname in LOOKUP_FUNCTIONS:
        path = root / "vllm" / rel
        if path.exists():
            func = sandbox.find_function(path, qualname)
            if func is not None and sandbox.calls(func, "get_layers_from_vllm_config"):
                found = (path, qualname)
                break
    if found is None:
        return {"outcome": "not-applicable", "detail": "this release has no OffloadingConnector layer lookup"}
    path, qualname = found

    model = request["model"]
    kinds = []  # (suffix, class name) per decoder layer, in the order the model registers them
    if model["dsa"]:
        kinds.append(("self_attn.indexer.k_cache", "DeepseekV32IndexerCache"))
    kinds.append(("self_attn.attn", "MLAAttention" if model["mla"] else "Attention"))
    classes = {}
    for _suffix, name in kinds:
        hit = sandbox.find_class(root, name, "AttentionLayerBase")
        if hit is None:
            return {"outcome": "not-applicable", "detail": f"this release has no {name} layer class"}
        classes[name] = hit

    # The static forward context the model's layers fill at construction: instances of the
    # release's own layer classes (built without their GPU-bound __init__; the lookup only
    # checks their class), in registration order (deepseek_v2 builds the indexer first).
    context: dict[str, Any] = {}
    for i in range(model["num_layers"]):
        for suffix, name in kinds:
            cls = classes[name][1]
            layer = cls.__new__(cls)
            torch.nn.Module.__init__(layer)
            layer.attn_backend = GpuBackendStandIn
            context[f"model.layers.{i}.{suffix}"] = layer
    vllm_config = SimpleNamespace(compilation_config=SimpleNamespace(static_forward_context=context))
    kv_caches = {name: torch.empty(0) for name in context}  # no memory: the lookup never reads them

    state = _OffloadWorkerStandIn(vllm_config)
    recorded: dict[str, Any] = {}

    def handler_recorder(**kwargs: Any) -> str:
        recorded.update(kwargs.get("attn_backends") or {})
        return "handler"

    platform = SimpleNamespace(is_cuda_alike=lambda: True)
    stand_ins = {"current_platform": platform, "CpuGpuOffloadingHandler": handler_recorder}
    function = sandbox.load_function(path, qualname, stand_ins)
    layer_set = ", ".join(f"{model['num_layers']} x {name} ({classes[name][0]})" for _s, name in kinds)
    result = {
        "file": str(path),
        "function": qualname,
        "inputs": f"{len(context)} layers from {model['source']}: {layer_set}",
        "stand_ins": [
            "layer objects built with cls.__new__ (their __init__ needs a GPU platform and a full config)",
            "vllm_config: only compilation_config.static_forward_context, which the lookup reads",
            "GPU transfer handlers (CUDA streams, pinned memory): recorders",
            *(["current_platform reports a CUDA-alike GPU"] if "get_handlers" in qualname else []),
        ],
    }
    return _call(result, root, lambda: _drain(function(state, kv_caches)), lambda: state.handed or recorded)


def _drain(value: Any) -> Any:
    """get_handlers (0.11.x) is a generator: its lookup runs when it is iterated."""
    if hasattr(value, "__next__"):
        return list(value)
    return value


def _call(
    result: dict[str, Any], root: Path, run: Callable[[], Any], handed: Callable[[], Any]
) -> dict[str, Any]:
    try:
        run()
    except Exception as exc:  # the release's own exception is the reproduction
        frames = traceback.extract_tb(exc.__traceback__)
        inside = [f for f in frames if f.filename.startswith(str(root))]
        lines = ["Traceback (most recent call last):\n", *traceback.format_list(inside)]
        lines += traceback.format_exception_only(type(exc), exc)
        result.update(
            outcome="raised",
            error=f"{type(exc).__name__}: {exc}".strip(),
            traceback="".join(lines).rstrip("\n"),
        )
        return result
    backends = handed() or {}
    names = sorted({getattr(b, "__name__", str(b)) for b in backends.values()})
    result.update(
        outcome="returned",
        error=None,
        traceback=None,
        detail=f"looked up all {len(backends)} layers; backends: {', '.join(names)}",
    )
    return result


CASES: dict[str, Callable[[Path, dict[str, Any]], dict[str, Any]]] = {
    "offload_layer_lookup": offload_layer_lookup,
}


def main() -> int:
    request = json.loads(sys.stdin.read())
    root = Path(request["root"])
    sandbox.enter(root, request.get("extensions", ()))
    try:
        result = CASES[request["case"]](root, request)
    except Exception as exc:  # our own set-up failed, not the release's function: say so
        result = {
            "outcome": "could-not-run",
            "detail": f"{type(exc).__name__}: {exc}",
            "traceback": traceback.format_exc(),
        }
    result["stood_in_modules"] = sandbox.stood_in()
    print(RESULT_MARK + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The reproductions that run a vLLM release's own code on CPU (child process side).

`python -m kvops.doctor.reproducing.repro_cases` reads one request (JSON) on stdin, puts the release on
sys.path (kvops.doctor.reproducing.release_sandbox), runs the case's function and prints one JSON result
after RESULT_MARK on stdout (vLLM's own logger also writes to stdout).

A case returns what ran: the release's file and function, the outcome, vLLM's own traceback
(only the frames inside the release), and every stand-in used, so a reader can tell a
reproduction from a printout.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from kvops.doctor.reproducing import release_sandbox as sandbox

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
            cls: Any = classes[name][1]
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
            "kv_caches: empty CPU tensors, in the order the layers register (deepseek_v2 builds the "
            "indexer first); vLLM's runner orders them by KV cache group, so a real log may name "
            "...self_attn.attn instead",
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
    result: dict[str, Any],
    root: Path,
    run: Callable[[], Any],
    handed: Callable[[], Any],
    describe: Callable[[], str] | None = None,
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
    if describe is not None:
        detail = describe()
    else:
        backends = handed() or {}
        names = sorted({getattr(b, "__name__", str(b)) for b in backends.values()})
        detail = f"looked up all {len(backends)} layers; backends: {', '.join(names)}"
    result.update(outcome="returned", error=None, traceback=None, detail=detail)
    return result


# Where each release keeps the kernel block-size choice: a function of v1/worker/utils.py (0.18+),
# earlier a static method of the GPU model runner taking attention groups.
BLOCK_SIZE_FUNCTIONS = (
    ("v1/worker/utils.py", "select_common_block_size"),
    ("v1/worker/gpu_model_runner.py", "GPUModelRunner.select_common_block_size"),
)


def dsa_block_size(root: Path, request: dict[str, Any]) -> dict[str, Any]:
    """vllm-dsa-block-size-64: the release's block-size choice for the DSA indexer's KV group."""
    found = _first_function(root, BLOCK_SIZE_FUNCTIONS)
    if found is None:
        return {"outcome": "not-applicable", "detail": "this release has no select_common_block_size"}
    path, qualname = found
    hit = sandbox.find_class(root, "DeepseekV32IndexerBackend", "AttentionBackend")
    if hit is None:
        return {"outcome": "not-applicable", "detail": "this release has no DeepSeek-V3.2 indexer backend"}
    backend: Any = hit[1]  # a class of the release's own code
    block_size = int(request["block_size"])
    function = sandbox.load_function(path, qualname)
    defined = sandbox.find_function(path, qualname)  # load_function found it: not None
    takes_groups = defined is not None and "attn_groups" in [a.arg for a in defined.args.args]
    # 0.17 and older pass AttentionGroups (which hold GPU metadata builders): only .backend is read
    arg = [SimpleNamespace(backend=backend)] if takes_groups else [backend]
    result = {
        "file": str(path),
        "function": qualname,
        "inputs": f"--block-size {block_size} for the KV group of {hit[0]}.DeepseekV32IndexerBackend "
        f"(supported kernel block sizes {backend.get_supported_kernel_block_sizes()})",
        "stand_ins": [
            *(["AttentionGroup: only its .backend, which the function reads"] if takes_groups else []),
            "platform: not ROCm (the indexer supports 64 on CUDA, 1 on ROCm)",
        ],
    }
    chosen: dict[str, Any] = {}

    def run() -> None:
        chosen["size"] = function(block_size, arg)

    return _call(result, root, run, lambda: None, lambda: f"kernel block size {chosen['size']} accepted")


def hybrid_unify(root: Path, request: dict[str, Any]) -> dict[str, Any]:
    """vllm-hma-disabled-unify-fail: the release's KV cache grouping for a hybrid model's layer specs."""
    import torch

    path = root / "vllm" / "v1/core/kv_cache_utils.py"
    if not path.exists() or sandbox.find_function(path, "get_kv_cache_groups") is None:
        return {"outcome": "not-applicable", "detail": "this release has no v1 get_kv_cache_groups"}
    interface = importlib.import_module("vllm.v1.kv_cache_interface")
    cfg = request["config"]
    layers = int(cfg["num_hidden_layers"])
    interval = int(cfg.get("full_attention_interval") or 4)
    types = cfg.get("layer_types") or [
        "full_attention" if (i + 1) % interval == 0 else "linear_attention" for i in range(layers)
    ]
    block = 16
    kv_heads, head = int(cfg.get("num_key_value_heads") or 2), int(cfg.get("head_dim") or 256)
    attn_page = 2 * block * kv_heads * head * 2  # K and V, bf16
    # Gated-DeltaNet state per sequence, shaped as vLLM's mamba_utils does (Qwen3-Next defaults)
    k_heads, v_heads = (
        int(cfg.get("linear_num_key_heads") or 16),
        int(cfg.get("linear_num_value_heads") or 32),
    )
    k_dim, v_dim = int(cfg.get("linear_key_head_dim") or 128), int(cfg.get("linear_value_head_dim") or 128)
    conv = (2 * k_heads * k_dim + v_heads * v_dim, int(cfg.get("linear_conv_kernel_dim") or 4) - 1)
    ssm = (v_heads, k_dim, v_dim)
    state_page = (conv[0] * conv[1] + v_heads * k_dim * v_dim) * 2
    page = max(attn_page, state_page)  # vLLM's hybrid config pads both kinds to one page size
    specs: dict[str, Any] = {}
    for i, kind in enumerate(types):
        if kind == "full_attention":
            specs[f"model.layers.{i}.self_attn.attn"] = _spec(
                interface.FullAttentionSpec,
                block_size=block,
                num_kv_heads=kv_heads,
                head_size=head,
                head_size_v=head,
                dtype=torch.bfloat16,
                page_size_padded=page,
            )
        else:
            specs[f"model.layers.{i}.linear_attn"] = _spec(
                interface.MambaSpec,
                block_size=block,
                shapes=(conv, ssm),
                dtypes=(torch.bfloat16, torch.bfloat16),
                page_size_padded=page,
                mamba_type="gdn_attention",
            )
    disable = bool(request["disable_hybrid_kv_cache_manager"])
    vllm_config = SimpleNamespace(scheduler_config=SimpleNamespace(disable_hybrid_kv_cache_manager=disable))
    function = sandbox.load_function(path, "get_kv_cache_groups")
    kinds = {type(v).__name__: sum(type(x) is type(v) for x in specs.values()) for v in specs.values()}
    result = {
        "file": str(path),
        "function": "get_kv_cache_groups",
        "inputs": f"{len(specs)} layer KV specs from {request['model']['source']}: "
        + ", ".join(f"{n} x {k}" for k, n in kinds.items())
        + f"; disable_hybrid_kv_cache_manager={disable}",
        "stand_ins": [
            "vllm_config: only scheduler_config.disable_hybrid_kv_cache_manager, which the function reads",
            f"one padded page size ({page} B) for every layer, as vLLM's hybrid model config sets it",
        ],
    }
    groups: dict[str, Any] = {}

    def run() -> None:
        groups["g"] = function(vllm_config, specs)

    return _call(result, root, run, lambda: None, lambda: f"{len(groups['g'])} KV cache groups built")


def _spec(cls: type, **values: Any) -> Any:
    """A release's KV spec dataclass from the fields this release has."""
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in values.items() if k in names})


def _first_function(root: Path, candidates: tuple[tuple[str, str], ...]) -> tuple[Path, str] | None:
    for rel, qualname in candidates:
        path = root / "vllm" / rel
        if path.exists() and sandbox.find_function(path, qualname) is not None:
            return path, qualname
    return None


CASES: dict[str, Callable[[Path, dict[str, Any]], dict[str, Any]]] = {
    "offload_layer_lookup": offload_layer_lookup,
    "dsa_block_size": dsa_block_size,
    "hybrid_unify": hybrid_unify,
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
    if result.get("function") in sandbox.HOW_LOADED:
        result["loaded"] = sandbox.HOW_LOADED[result["function"]]
    print(RESULT_MARK + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

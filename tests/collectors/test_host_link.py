"""The host link (issue 45): NVLink-C2C on Grace through GPM, PCIe health, through the real pynvml
over the stub libnvidia-ml.so.1, from the collector up to `kvops top --once --json`."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from collectors import nvml_stub
from collectors.exporter_process import clean_env, free_port, nvml_env, nvml_exporter, page_text
from collectors.stub_calls import call_log
from kvops.collectors.nvidia import NvidiaCollector

MIB = 1 << 20
CAPTURE = Path(__file__).parent / "captures" / "pcie_series_before_host_link.prom"


def _calls(libdir: Path, fn: str) -> int:
    import ctypes

    return int(call_log(ctypes.CDLL(str(libdir / nvml_stub.LIB_NAME))).kvops_stub_calls(fn.encode()))


def test_c2c_link_from_fields_and_gpm_integrated_between_scrapes(
    nvml_script: Callable[..., Path], nvml_libdir: Path
) -> None:
    gpu = nvml_stub.gh200()
    gpu.fields = {231: 2, 232: 5}
    nvml_script([gpu])
    c = NvidiaCollector()
    try:
        t0 = time.monotonic()
        first = c.collect()[0]
        static_calls = _calls(nvml_libdir, "nvmlGpmQueryDeviceSupport")
        time.sleep(0.3)
        second = c.collect()[0]
        elapsed = time.monotonic() - t0  # the two GPM samples were taken within it
        third = c.collect()[0]
        assert _calls(nvml_libdir, "nvmlGpmQueryDeviceSupport") == static_calls  # read once per GPU
    finally:
        c.close()
    assert first.host_link_kind == "c2c"
    assert first.host_link_max_bytes_per_second == {"c2c": 450e9}  # 1 link x 450,000 MB/s
    assert first.host_link_rx_bytes == {"c2c": 0.0}  # counting starts with the first sample
    assert first.host_link_rx_bytes_per_second == {}  # no interval yet
    rx = second.host_link_rx_bytes["c2c"]
    # 8192 MiB/s over the time between the two samples: at least the sleep, at most t0 -> after
    assert 8192 * MIB * 0.3 <= rx <= 8192 * MIB * elapsed
    assert second.host_link_rx_bytes_per_second == {"c2c": 8192 * MIB}
    assert second.host_link_tx_bytes_per_second == {"c2c": 1024 * MIB}
    assert third.host_link_rx_bytes["c2c"] >= rx  # a counter
    assert second.host_link_errors == {"c2c_error_interrupts": 2.0, "c2c_replay": 5.0}
    # PCIe's own series stay as they were: the GPU's near-zero PCIe counters
    assert second.pcie_rx_bytes == 8192
    assert second.host_link_rx_bytes.get("pcie") is None


def test_c2c_without_gpm_has_no_traffic_and_says_so(
    nvml_script: Callable[..., Path], caplog: pytest.LogCaptureFixture
) -> None:
    nvml_script([nvml_stub.gh200(gpm=False)])
    c = NvidiaCollector()
    try:
        with caplog.at_level("WARNING"):
            c.collect()
            s = c.collect()[0]
    finally:
        c.close()
    assert s.host_link_kind == "c2c"
    assert s.host_link_max_bytes_per_second == {"c2c": 450e9}
    assert s.host_link_rx_bytes == {} and s.host_link_rx_bytes_per_second == {}
    said = [r.getMessage() for r in caplog.records if "GPM not supported" in r.getMessage()]
    assert len(said) == 1 and "cross-check stays unknown" in said[0]


def test_pcie_link_mirrors_pcie_series_and_reads_health_fields(nvml_script: Callable[..., Path]) -> None:
    gpu = nvml_stub.gpus(1)[0]
    gpu.replay = 4
    gpu.fields = {169: 3, 174: 1, 176: 9}  # L0 -> recovery, NAKs received, bad TLPs
    nvml_script([gpu])
    c = NvidiaCollector()
    try:
        s = c.collect()[0]
    finally:
        c.close()
    assert s.host_link_kind == "pcie"
    assert s.host_link_rx_bytes == {"pcie": s.pcie_rx_bytes} == {"pcie": 2_000_000}
    assert s.host_link_max_bytes_per_second == {"pcie": s.pcie_link_max_bytes_per_second}
    assert s.host_link_errors == {"replay": 4, "l0_to_recovery": 3, "naks_received": 1, "bad_tlp": 9}


def test_gpm_pcie_rates_replace_the_20ms_sampler(nvml_script: Callable[..., Path], nvml_libdir: Path) -> None:
    gpu = nvml_stub.gpus(1)[0]
    gpu.pcie_tx_bytes = gpu.pcie_rx_bytes = None  # no fields 197/198 ...
    gpu.pcie_tx_kbps = gpu.pcie_rx_kbps = 1000  # ... the sampler could cover,
    gpu.gpm_supported = True  # but GPM measures PCIe without a wait
    gpu.gpm_mib_per_s = {nvml_stub.GPM_PCIE_TX_PER_SEC: 10.0, nvml_stub.GPM_PCIE_RX_PER_SEC: 20.0}
    nvml_script([gpu])
    before = _calls(nvml_libdir, "nvmlDeviceGetPcieThroughput")
    c = NvidiaCollector(throughput_interval=0.05)
    try:
        c.collect()
        time.sleep(0.2)
        s = c.collect()[0]
    finally:
        c.close()
    assert s.pcie_rx_bytes_per_second == 20 * MIB and s.pcie_tx_bytes_per_second == 10 * MIB
    assert s.host_link_rx_bytes_per_second == {"pcie": 20 * MIB}
    assert _calls(nvml_libdir, "nvmlDeviceGetPcieThroughput") == before  # no sampler thread


def test_nvlink5_byte_counters_where_the_kib_ones_are_not(nvml_script: Callable[..., Path]) -> None:
    gpu = nvml_stub.gpus(1)[0]
    gpu.extra = {"field.91": "2", "field.91.type": "1", "field.202.0": "5000", "field.204.1": "7000"}
    gpu.field_ret = {138: 3, 139: 3}
    nvml_script([gpu])
    c = NvidiaCollector()
    try:
        c.collect()
        s = c.collect()[0]
    finally:
        c.close()
    assert s.nvlink_tx_bytes == {"0": 5000.0}  # bytes, not KiB
    assert s.nvlink_rx_bytes == {"1": 7000.0}


# --- through the exporter -----------------------------------------------------------------------


@pytest.mark.slow  # starts the exporter
def test_pcie_series_unchanged_byte_for_byte(nvml_libdir: Path, tmp_path: Path) -> None:
    devices = nvml_stub.gpus(2)
    devices[1].pcie_tx_bytes = None
    devices[1].pcie_tx_kbps, devices[1].pcie_rx_kbps = 1000, 2000
    devices[0].replay = 7
    config = nvml_stub.write_config(tmp_path / "nvml.conf", devices)
    with nvml_exporter(nvml_libdir, config) as url:
        deadline = time.monotonic() + 10
        while "kvops_gpu_pcie_receive_bytes_per_second{" not in (text := page_text(url)):
            assert time.monotonic() < deadline, "the PCIe sampler never reported"
            time.sleep(0.3)
    pcie = [line for line in text.splitlines() if "kvops_gpu_pcie_" in line]
    assert "\n".join(pcie) + "\n" == CAPTURE.read_text()
    assert 'kvops_gpu_host_link_info{gpu="0",kind="pcie"' in text  # the new series beside them


def _sim(port: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "kvops.cli", "sim", "--listen", f"127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _loaded_bytes(sim_url: str) -> float:
    for line in page_text(sim_url + "/metrics").splitlines():
        if line.startswith("vllm:kv_offload_total_bytes_total{") and 'transfer_type="CPU_to_GPU"' in line:
            return float(line.rsplit(" ", 1)[1])
    return 0.0


@pytest.mark.slow  # a simulated vLLM, two exporters and three `kvops top` runs: ~35 s
def test_cross_check_on_c2c_reaches_top_through_the_exporter(nvml_libdir: Path, tmp_path: Path) -> None:
    """A GH200-like GPU whose compute process is a simulated vLLM loading GBs: top says the
    loads are consistent with the C2C traffic GPM measured; without GPM it says unknown, never
    counted_not_moved (what PCIe's near-zero counter would give)."""
    sim_port = free_port()
    sim_url = f"http://127.0.0.1:{sim_port}"
    sim = _sim(sim_port)
    try:
        configs = {}
        for name, gpm in (("gpm", True), ("nogpm", False)):
            gpu = nvml_stub.gh200(gpm=gpm)
            gpu.procs = {sim.pid: 70_000_000_000}
            configs[name] = nvml_stub.write_config(tmp_path / f"{name}.conf", [gpu])
        with (
            nvml_exporter(nvml_libdir, configs["gpm"], sim_url) as with_gpm,
            nvml_exporter(nvml_libdir, configs["nogpm"], sim_url) as without_gpm,
        ):
            deadline = time.monotonic() + 60
            while _loaded_bytes(sim_url) < 5e8:  # the simulated CPU tier fills before it is read
                assert time.monotonic() < deadline, "the simulator never loaded from its CPU tier"
                time.sleep(0.5)
            # top reading each exporter, and top on the vLLM URL itself, with this host's
            # (stub) NVML: it tracks the target's processes as the exporter does
            local_env = nvml_env(nvml_libdir, configs["gpm"])
            runs = {
                name: subprocess.Popen(
                    [sys.executable, "-m", "kvops.cli", "top", "--once", "--json", "--interval", "10", url],
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                    env=env,
                )
                for name, url, env in (
                    ("gpm", with_gpm, clean_env()),
                    ("nogpm", without_gpm, clean_env()),
                    ("local", sim_url, local_env),
                )
            }
            docs = {}
            for name, run in runs.items():
                out, err = run.communicate(timeout=60)
                assert run.returncode == 0, err
                docs[name] = json.loads(out)
            pages = []  # two pages of the exporter, for top's text view of them
            for i in range(2):
                pages.append(tmp_path / f"page{i}.prom")
                pages[-1].write_text(page_text(with_gpm))
                time.sleep(1.2)
    finally:
        sim.kill()
        sim.wait()
    screen = subprocess.run(
        [sys.executable, "-m", "kvops.cli", "top", "--once", "--replay", *map(str, pages)],
        capture_output=True,
        text=True,
        env=clean_env(),
        timeout=60,
    )
    assert screen.returncode == 0, screen.stderr
    (gpu_line,) = [line for line in screen.stdout.splitlines() if line.startswith("GPU 0 ")]
    assert " C2C TX " in gpu_line and "PCIe" not in gpu_line, gpu_line
    assert "(link max 450.00 GB/s per direction)" in gpu_line, gpu_line
    for name, doc in docs.items():
        (engine,) = [t for t in doc["targets"] if t["target"] == sim_url]
        assert engine["load_bytes"] > 1e9, (name, engine["load_bytes"])  # GBs over the interval
        (gpu,) = doc["gpus"]
        assert gpu["host_link_kind"] == "c2c"
        assert gpu["host_link_max_bytes_per_second"] == 450e9
        assert gpu["pcie_receive_bytes_per_second"] == 0  # PCIe carries nothing here
        verdict = engine["pcie_cross_check"]
        if name in ("gpm", "local"):
            assert verdict == "consistent"
            # GPM's sample times (the exporter's rounds) against top's frame times: two clocks
            assert gpu["host_link_receive_bytes_per_second"] == pytest.approx(8192 * MIB, rel=0.2)
        else:
            assert verdict is None
            assert gpu["host_link_receive_bytes_per_second"] is None


def test_gpu_check_prints_each_calls_answer(nvml_libdir: Path, tmp_path: Path) -> None:
    """benchmarks/gpu_check.py, the script to run once on silicon, over the stub: what it prints
    is what the driver answered (the GH200's C2C fields and GPM rates, PCIe's NOT_SUPPORTED)."""
    config = nvml_stub.write_config(tmp_path / "nvml.conf", [nvml_stub.gh200()])
    env = nvml_env(nvml_libdir, config)
    script = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_check.py"
    run = subprocess.run(
        [sys.executable, str(script), "--gpm-wait", "0.05"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    (gpu,) = json.loads(run.stdout)["nvidia"]["gpus"]
    assert gpu["field_values"]["172 C2C_LINK_GET_MAX_BW (MB/s)"] == {"value": 450_000, "valueType": 1}
    assert gpu["field_values"]["169 PCIE_L0_TO_RECOVERY_COUNTER"]["nvmlReturn"] == 3
    assert gpu["gpm"]["103 C2C_DATA_RX_PER_SEC"] == {"MiB/s": 8192.0}
    assert "error" in json.loads(run.stdout)["amd"]  # no ROCm here: said, not raised
    bad = subprocess.run(
        [sys.executable, str(script), "--gpm-wait", "0"], capture_output=True, text=True, env=env
    )
    assert bad.returncode == 2 and "Traceback" not in bad.stderr


def test_bench_dma_holds_a_grace_gpu_against_its_c2c_maximum(nvml_script: Callable[..., Path]) -> None:
    """`kvops bench dma`'s link max comes through the collector: C2C's 450 GB/s on the GH200, not
    the 63 GB/s of the PCIe Gen5 x16 the stub also reports."""
    from bench.helpers import DEVICE  # a torch-like device description

    from kvops.bench import linkmax

    gpu = nvml_stub.gh200(uuid=f"GPU-{DEVICE.uuid}")  # NVML's form of torch's uuid
    nvml_script([gpu])
    c = NvidiaCollector()
    try:
        samples = c.collect()
    finally:
        c.close()
    link = linkmax.from_samples(DEVICE, samples, "nvidia")
    assert link.bytes_per_second == 450e9
    assert "NVLink-C2C" in link.source

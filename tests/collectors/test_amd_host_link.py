"""AMD's side of issue 45 through the real amdsmi package over the stub libamd_smi.so, read from
`kvops exporter`'s page: the metrics table's combined PCIe bandwidth with its unit (absent, never
0, where the firmware lacks it), the PCIe health counters, the NUMA affinity, the host link."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from collectors import amd_stub
from collectors.amd_stub import StubAmdGpu
from collectors.exporter_process import clean_env, page_text, running_exporter


@pytest.mark.slow  # starts the exporter
def test_amd_metrics_table_bandwidth_health_and_numa_on_the_page(
    amdsmi_module: ModuleType, tmp_path: Path
) -> None:
    rocm = amd_stub.build(tmp_path / "rocm")
    mi300 = StubAmdGpu(
        uuid="amd-mi300",
        pcie_bandwidth_acc=123_456,
        pcie_bandwidth_inst=42,
        metrics_version=(1, 5),
        l0_to_recovery=3,
        nak_sent=1,
        nak_received=2,
        numa_node=1,
        links=[("0000:c2:00.0", 2, 1000, 2000), ("0000:00:01.0", 1, 30, 40)],  # XGMI peer, PCIe root
    )
    older = StubAmdGpu(uuid="amd-old", bdf="0000:c2:00.0", metrics_version=(1, 3))  # no such fields
    config = amd_stub.write_config(tmp_path / "amd.conf", amdsmi_module, [mi300, older], pci_sleep_ms=10)
    env = dict(clean_env(), ROCM_PATH=str(rocm), **{amd_stub.CONFIG_ENV: str(config)})
    with running_exporter(env, "--no-collector", "nvidia") as (url, _):
        page = page_text(url)
    base = 'gpu="0",uuid="amd-mi300",vendor="amd"'
    for figure, value in (("acc", "123456.0"), ("inst", "42.0")):
        line = (
            f'kvops_gpu_amd_pcie_bandwidth{{figure="{figure}",gpu="0",metrics_table="1.5",unit="GB/s",'
            f'uuid="amd-mi300",vendor="amd"}} {value}'
        )
        assert line in page.splitlines(), figure
    assert 'kvops_gpu_amd_pcie_bandwidth{figure="acc",gpu="1"' not in page  # firmware without: absent
    errors = [
        x for x in page.splitlines() if x.startswith("kvops_gpu_host_link_errors_total{") and 'gpu="0"' in x
    ]
    got = {x.split('counter="')[1].split('"')[0]: x.rsplit(" ", 1)[1] for x in errors}
    assert got == {"l0_to_recovery": "3.0", "naks_received": "2.0", "naks_sent": "1.0", "replay": "7.0"}
    assert f"kvops_gpu_numa_node{{{base}}} 1.0" in page
    from prometheus_client.parser import text_string_to_metric_families

    links = {
        (sample.name, sample.labels["link"], sample.labels["link_type"], sample.labels["peer"]): sample.value
        for fam in text_string_to_metric_families(page)
        for sample in fam.samples
        if sample.name.startswith("kvops_gpu_link_") and sample.labels["gpu"] == "0"
    }
    assert links == {
        ("kvops_gpu_link_read_bytes_total", "0", "xgmi", "0000:c2:00.0"): 1000 * 1024,
        ("kvops_gpu_link_write_bytes_total", "0", "xgmi", "0000:c2:00.0"): 2000 * 1024,
        ("kvops_gpu_link_read_bytes_total", "1", "pcie", "0000:00:01.0"): 30 * 1024,
        ("kvops_gpu_link_write_bytes_total", "1", "pcie", "0000:00:01.0"): 40 * 1024,
    }  # num_links of them, not amdsmi's 8 entries
    assert 'kvops_gpu_link_read_bytes_total{gpu="1"' not in page  # no link metrics: no series
    assert 'kvops_gpu_host_link_info{gpu="0",kind="pcie",uuid="amd-mi300",vendor="amd"} 1.0' in page

"""`kvops doctor --repro` with a vLLM release's own code on CPU.

The tests marked `vllm_release` download real vLLM wheels from PyPI once (into the user's cache,
~/.cache/kvops/vllm; about 17-24 MB kept per release) and run their code; the default test run
deselects them and .ci/run runs them as their own step. The rest build small release trees here.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from kvops.doctor.judging import catalog
from kvops.doctor.reading import known_models, release_stand_ins, vllm_release
from kvops.doctor.reproducing import repro, repro_release
from kvops.errors import UsageError

from .conftest import MODELS

KEY = "model.layers.0.self_attn.indexer.k_cache"


def _record_row(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def _fake_wheel(tmp_path: Path) -> Path:
    """A wheel shaped like vLLM's: its .py members, a compiled module, and the RECORD of their hashes."""
    members = {
        "vllm/__init__.py": b"",
        "vllm/layers.py": b"class Base:\n    pass\n\n\nclass Special(Base):\n    pass\n",
        "vllm/lookup.py": b"from vllm.layers import Base\n\n\n"
        b"def pick(ctx, names):\n"
        b"    found = {n: ctx[n] for n in names if isinstance(ctx[n], Base)}\n"
        b"    return {n: found[n] for n in names}\n",
        "vllm/_C.abi3.so": b"\x7fELF",
        "vllm-9.9.9.dist-info/METADATA": b"Name: vllm\n",
    }
    record = "\n".join(_record_row(n, d) for n, d in members.items()) + "\nvllm-9.9.9.dist-info/RECORD,,\n"
    wheel = tmp_path / "vllm-9.9.9-cp38-abi3-manylinux_2_31_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
        zf.writestr("vllm-9.9.9.dist-info/RECORD", record)
        zf.writestr("../escape.py", "x = 1\n")
        zf.writestr("vllm/../../escape2.py", "x = 1\n")
    return wheel


def test_unpack_keeps_only_the_release_python_and_records_the_extensions(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    release = vllm_release._unpack("9.9.9", _fake_wheel(tmp_path), cache)
    files = sorted(p.relative_to(release.root).as_posix() for p in release.root.rglob("*.py"))
    assert files == ["vllm/__init__.py", "vllm/layers.py", "vllm/lookup.py"]
    assert release.extensions == ("vllm._C",)
    assert not list(tmp_path.rglob("escape*.py"))
    assert (
        release.sha256 is not None and len(release.sha256) == 64 and release.wheel.startswith("vllm-9.9.9-")
    )
    again = vllm_release.cached("9.9.9", cache)
    assert again is not None and again.root == release.root and again.verified_files == 3
    assert again.sha256 is None  # the wheel is gone: no hash is claimed for it from the manifest


def test_a_corrupt_wheel_is_one_usage_error_and_leaves_no_partial_tree(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    bad = tmp_path / "vllm-9.9.9-cp38-abi3-manylinux_2_31_x86_64.whl"
    bad.write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(UsageError, match="could not unpack"):
        vllm_release._unpack("9.9.9", bad, cache)
    assert list(cache.iterdir()) == [] and vllm_release.cached("9.9.9", cache) is None


def test_a_cached_release_is_used_without_pip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    vllm_release._unpack("9.9.9", _fake_wheel(tmp_path), cache)

    def no_network(*_a: object, **_k: object) -> None:
        raise AssertionError("pip was called for a cached release")

    monkeypatch.setattr(vllm_release, "_pip_download", no_network)
    log = tmp_path / "log"
    with log.open("w") as fh:
        assert vllm_release.fetch("9.9.9", log=fh, cache=cache).version == "9.9.9"
    assert "using the cached source" in log.read_text()


@pytest.mark.parametrize("version", ["latest", "0.14.0; rm -rf /", "../0.14.0", ""])
def test_a_version_that_is_not_a_release_number_is_a_usage_error(version: str, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="expected a vLLM release"):
        vllm_release.fetch(version, cache=tmp_path)


def test_cache_dir_follows_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert vllm_release.cache_dir() == tmp_path / "kvops" / "vllm"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert vllm_release.cache_dir() == Path.home() / ".cache" / "kvops" / "vllm"


def test_a_function_runs_from_its_own_file_with_its_own_imports(tmp_path: Path) -> None:
    """The traceback of the loaded function points at the release file's own line."""
    cache = tmp_path / "cache"
    cache.mkdir()
    release = vllm_release._unpack("9.9.9", _fake_wheel(tmp_path), cache)
    script = (
        "import sys, traceback\n"
        "from pathlib import Path\n"
        "from kvops.doctor.reproducing import release_sandbox as sb\n"
        f"root = Path({str(release.root)!r})\n"
        "sb.enter(root, ['vllm._C'])\n"
        "import vllm._C\n"
        "from vllm.layers import Base, Special\n"
        "pick = sb.load_function(root / 'vllm/lookup.py', 'pick')\n"
        "print(sorted(pick({'a': Special(), 'b': Base()}, ['a', 'b'])))\n"
        "try:\n"
        "    pick({'a': object()}, ['a'])\n"
        "except KeyError:\n"
        "    f = traceback.extract_tb(sys.exc_info()[2])[-1]\n"
        "    print(Path(f.filename).name, f.lineno, f.line)\n"
        "print(sb.stood_in())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=tmp_path
    ).stdout.splitlines()
    assert out == [
        "['a', 'b']",
        "lookup.py 6 return {n: found[n] for n in names}",
        "['vllm._C']",
    ]


def test_stand_in_modules_accept_class_keywords_and_decorators() -> None:
    mod = release_stand_ins.StandInModule("msgspec")

    class Params(mod.Struct, omit_defaults=True):  # as vllm.sampling_params does
        pass

    @mod.some.decorator
    def f() -> int:
        return 7

    assert f() == 7 and isinstance(Params(), Params) and not list(mod.anything)


def test_every_release_case_has_a_playbook_and_a_shipped_model() -> None:
    cat = catalog.load()
    for pb_id, case in repro_release.CASES.items():
        assert cat.get(pb_id) is not None, pb_id
        assert known_models.shipped_model(case.model).is_file()
        assert case.fixed is None or _numbers(case.fixed) > _numbers(case.affected)


def _numbers(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in version.split("."))


# --- real releases: downloaded once into the user's cache, run on CPU --------------------------


@pytest.mark.vllm_release
@pytest.mark.timeout(1800)  # the first run downloads 370-500 MB wheels
def test_0_14_0_raises_its_own_keyerror_and_0_18_0_passes(tmp_path: Path) -> None:
    result = _cli("--repro", "mla-indexer-keyerror", "--vllm-version", "0.14.0", "--json")
    ran = result["executed"]
    assert ran["vllm_version"] == "0.14.0" and ran["outcome"] == "raised"
    assert ran["error"] == f"KeyError: '{KEY}'"
    assert ran["function"] == "OffloadingConnectorWorker.register_kv_caches"
    rel = "vllm/0.14.0/vllm/distributed/kv_transfer/kv_connector/v1/offloading_connector.py"
    assert ran["file"].endswith(rel)
    assert Path(ran["file"]).is_file() and ran["file"] in ran["traceback"]
    assert "layers[layer_name].get_attn_backend()" in ran["traceback"]
    assert result["reproduced"] is True and result["fix_confirmed"] is True
    fixed = result["fix_executed"]
    assert fixed["vllm_version"] == "0.18.0" and fixed["outcome"] == "returned" and fixed["traceback"] is None
    assert "all 122 layers" in fixed["detail"]


@pytest.mark.vllm_release
@pytest.mark.timeout(1800)  # the first run downloads 370-500 MB wheels
@pytest.mark.parametrize("version", ["0.11.2", "0.18.0"])
def test_unaffected_releases_look_every_layer_up(version: str) -> None:
    result = _cli("--repro", "mla-indexer-keyerror", "--vllm-version", version, "--json")
    ran = result["executed"]
    assert ran["vllm_version"] == version and ran["outcome"] == "returned", ran
    assert "KeyError" not in json.dumps(ran) and "all 122 layers" in ran["detail"]
    assert result["reproduced"] is False and result["fix_confirmed"] is None


@pytest.mark.vllm_release
@pytest.mark.timeout(1800)  # the first run downloads 370-500 MB wheels
def test_a_plain_mla_model_raises_on_its_attention_layer() -> None:
    dsv3 = str(MODELS / "deepseek-v3.json")
    result = _cli("--repro", "vllm-offload-mla-keyerror", "--model", dsv3, "--json")
    assert result["executed"]["error"] == "KeyError: 'model.layers.0.self_attn.attn'"
    assert result["reproduced"] is True and result["fix_confirmed"] is True


@pytest.mark.vllm_release
@pytest.mark.timeout(1800)  # the first run downloads 370-500 MB wheels
def test_a_model_without_mla_is_not_affected() -> None:
    result = _cli("--repro", "mla-indexer-keyerror", "--model", str(MODELS / "llama-3.1-8b.json"), "--json")
    assert result["executed"]["outcome"] == "returned" and result["reproduced"] is False
    assert "32 x Attention" in result["executed"]["inputs"]


def _cli(*args: str) -> dict:
    proc = subprocess.run(
        [sys.executable, "-m", "kvops.cli", "doctor", *args], capture_output=True, text=True, timeout=1800
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


def test_text_report_shows_the_release_traceback_sanitised() -> None:
    result = {
        "id": "mla-indexer-keyerror",
        "title": "t",
        "failing_command": None,
        "fixed_command": None,
        "reproduced": True,
        "fix_confirmed": None,
        "could_not": [],
        "executed": {
            "vllm_version": "0.14.0",
            "function": "F.g",
            "file": "/c/x.py",
            "inputs": "2 layers",
            "outcome": "raised",
            "traceback": "Traceback:\n  File \"/c/x.py\", line 3\nKeyError: 'a\x1b]52;c;bad\x07'",
        },
    }
    text = repro.to_text(result, None)
    assert "\x1b" not in text and "\\x1b]52" in text and "reproduced: yes" in text


@pytest.mark.vllm_release
@pytest.mark.timeout(1800)  # the first run downloads 370-500 MB wheels
def test_dsa_block_size_16_is_refused_by_the_release_and_64_accepted() -> None:
    result = _cli("--repro", "vllm-dsa-block-size-64", "--vllm-version", "0.18.0", "--json")
    ran, fixed = result["executed"], result["fix_executed"]
    assert ran["error"].startswith("ValueError: No common block size for 16")
    assert (
        ran["file"].endswith("vllm/0.18.0/vllm/v1/worker/utils.py") and "raise ValueError" in ran["traceback"]
    )
    assert "DeepseekV32IndexerBackend" in ran["inputs"] and "[64]" in ran["inputs"]
    assert (
        fixed["vllm_version"] == "0.18.0"
        and fixed["fixed_by"] == "flags: remove --block-size, --block-size=64"
    )
    assert fixed["outcome"] == "returned" and "64" in fixed["detail"]
    assert result["reproduced"] is True and result["fix_confirmed"] is True


@pytest.mark.vllm_release
@pytest.mark.timeout(1800)  # the first run downloads 370-500 MB wheels
def test_the_users_block_size_64_does_not_fail() -> None:
    cmd = "vllm serve deepseek-ai/DeepSeek-V3.2 --block-size 64"
    result = _cli("--repro", "vllm-dsa-block-size-64", "--vllm-version", "0.18.0", "--cmd", cmd, "--json")
    assert result["executed"]["outcome"] == "returned" and result["reproduced"] is False


@pytest.mark.vllm_release
@pytest.mark.timeout(1800)  # the first run downloads 370-500 MB wheels
def test_hybrid_specs_cannot_be_unified_with_the_hybrid_manager_off() -> None:
    result = _cli("--repro", "vllm-hma-disabled-unify-fail", "--vllm-version", "0.18.0", "--json")
    ran, fixed = result["executed"], result["fix_executed"]
    assert "failed to convert the KV cache specs to one unified type" in ran["error"]
    assert ran["function"] == "get_kv_cache_groups" and "unify_hybrid_kv_cache_specs" in ran["traceback"]
    assert "36 x MambaSpec, 12 x FullAttentionSpec" in ran["inputs"]
    assert "disable_hybrid_kv_cache_manager=False" in fixed["inputs"] and fixed["outcome"] == "returned"
    assert result["reproduced"] is True and result["fix_confirmed"] is True


def test_a_kernel_failure_says_it_has_no_cpu_reproduction(kvops) -> None:
    code, out, _ = kvops("doctor", "--repro", "aiter-gemm-unsupported", "--json")
    data = json.loads(out)
    assert code == 0 and data["reproduced"] is None and "executed" not in data
    assert any("MI300-class GPU" in c for c in data["could_not"])
    assert data["failing_command"].startswith("VLLM_ROCM_USE_AITER=1 vllm serve")


# --- the cache is checked against the wheel's RECORD before any of its code runs ----------------
def _unpacked(tmp_path: Path) -> tuple[Path, vllm_release.Release]:
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    return cache, vllm_release._unpack("9.9.9", _fake_wheel(tmp_path), cache)


def test_planted_code_in_a_cached_module_is_refused(tmp_path: Path) -> None:
    cache, release = _unpacked(tmp_path)
    target = release.root / "vllm" / "layers.py"
    target.write_text(target.read_text() + "import os; os.system('touch /tmp/pwned')\n")
    with pytest.raises(UsageError, match=r"layers\.py differs from the wheel's RECORD"):
        vllm_release.fetch("9.9.9", cache=cache)


@pytest.mark.parametrize(
    "extra", ["vllm/sitecustomize.py", "torch.py", "vllm/__pycache__/layers.cpython-311.pyc"]
)
def test_a_file_the_wheel_did_not_carry_is_refused(tmp_path: Path, extra: str) -> None:
    cache, release = _unpacked(tmp_path)
    (release.root / extra).parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    (release.root / extra).write_text("print('planted')\n")
    with pytest.raises(UsageError, match="does not list"):
        vllm_release.fetch("9.9.9", cache=cache)


def test_a_made_up_sha256_in_the_manifest_is_never_reported(tmp_path: Path) -> None:
    cache, release = _unpacked(tmp_path)
    manifest = release.root / vllm_release.MANIFEST
    meta = json.loads(manifest.read_text())
    meta["sha256"] = meta["sha256_at_download"] = "0" * 64
    manifest.write_text(json.dumps(meta))
    again = vllm_release.cached("9.9.9", cache)
    assert again is not None and again.sha256 is None
    assert "0" * 64 not in repr(again)


def test_a_cache_dir_not_owned_by_the_user_is_refused(tmp_path: Path) -> None:
    cache, release = _unpacked(tmp_path)
    if os.getuid() == 0:  # root owns what it creates: chown to another uid to play the other user
        os.chown(release.root, 65534, 65534)
    else:
        pytest.skip("needs root to make a directory another user owns")
    with pytest.raises(UsageError, match="not you"):
        vllm_release.fetch("9.9.9", cache=cache)


def test_a_cache_dir_others_can_write_is_refused(tmp_path: Path) -> None:
    cache, release = _unpacked(tmp_path)
    (release.root / "vllm").chmod(0o777)
    with pytest.raises(UsageError, match="writable by group or others"):
        vllm_release.fetch("9.9.9", cache=cache)


def test_a_tree_unpacked_by_an_older_kvops_without_record_is_fetched_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache, release = _unpacked(tmp_path)
    (release.root / vllm_release.RECORD).unlink()
    meta = json.loads((release.root / vllm_release.MANIFEST).read_text())
    meta.pop("record")
    (release.root / vllm_release.MANIFEST).write_text(json.dumps(meta))
    assert vllm_release.cached("9.9.9", cache) is None
    monkeypatch.setattr(vllm_release, "_pip_download", lambda version, dest, log: _fake_wheel(dest))
    fresh = vllm_release.fetch("9.9.9", cache=cache, log=open(os.devnull, "w"))  # noqa: SIM115
    assert fresh.sha256 is not None and (fresh.root / vllm_release.RECORD).is_file()


# --- `pip install 'kvops[repro]'` is everything --repro needs -----------------------------------
def test_the_repro_extra_installs_every_module_the_release_code_needs() -> None:
    text = (Path(__file__).parents[2] / "pyproject.toml").read_text()
    line = next(ln for ln in text.splitlines() if ln.startswith("repro = ["))
    names = {
        re.split(r"[<>=\[ ]", item.strip().strip('"'))[0] for item in line[len("repro = [") : -1].split(",")
    }
    assert names == set(repro_release.REPRO_MODULES)


def test_a_missing_module_names_the_extra_with_a_command_for_this_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = repro_release.importlib.util.find_spec
    monkeypatch.setattr(
        repro_release.importlib.util, "find_spec", lambda name: None if name == "numpy" else real(name)
    )
    message = repro_release.missing_runtime()
    assert message is not None and message.startswith("numpy not installed")
    # this checkout is installed editable (or run from its tree): the command points at it
    assert f"{sys.executable} -m pip install -e '{Path(__file__).parents[2]}[repro]'" in message


def test_the_install_command_follows_direct_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A kvops installed into site-packages (not run from a checkout): pip's direct_url.json says
    whether it came from an index or a clone; another kvops on the path is not looked at."""
    from kvops import install_hint

    class Dist:
        def __init__(self, text: str | None, mine: bool = True) -> None:
            self.text, self.mine = text, mine
            self.metadata = {"Name": "kvops"}

        def read_text(self, name: str) -> str | None:
            return self.text

        def locate_file(self, rel: str) -> Path:
            return Path(install_hint.__file__) if self.mine else tmp_path / "other" / rel

    monkeypatch.setattr(install_hint, "_source_tree", lambda: None)
    other = Dist(json.dumps({"url": "file:///work/main", "dir_info": {"editable": True}}), mine=False)
    cases = {
        None: install_hint.EXTRA_PACKAGES["repro"],  # a wheel or an index: the packages themselves
        json.dumps({"url": tmp_path.as_uri(), "dir_info": {}}): f"'{tmp_path}[repro]'",
        json.dumps({"url": "file:///gone/clone", "dir_info": {}}): "'.[repro]' (from your kvops clone)",
    }
    for direct, wanted in cases.items():
        monkeypatch.setattr(install_hint.metadata, "distributions", lambda d=direct: [other, Dist(d)])
        assert install_hint.install_command("repro").endswith(f"-m pip install {wanted}")

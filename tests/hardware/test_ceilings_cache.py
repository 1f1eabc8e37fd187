"""The ceilings' on-disk cache: keyed by device and software (CUDA/HIP too), unreadable files measured again, and a
cache that cannot be written costs the cache, not the measurements (the probe is stubbed: no GPU here)."""
from __future__ import annotations

import json

import pytest

from tilecraft.hardware import ceilings as C
from tilecraft.hardware.device import DeviceInfo

GPU = DeviceInfo("NVIDIA H200", "cuda", 132, 50 * 2**20, 141 * 2**30, "9.0",
                 {"torch": "2.11.0", "triton": "3.6.0", "cuda": "13.0"})


def test_cache_key_holds_the_cuda_version(monkeypatch, tmp_path):
    monkeypatch.setenv("TILECRAFT_CACHE", str(tmp_path))
    other = DeviceInfo(**{**GPU.__dict__, "versions": {**GPU.versions, "cuda": "12.8"}})
    assert C.cache_path(GPU) != C.cache_path(other) and "cuda13.0" in C.cache_path(GPU).name


@pytest.mark.parametrize("content", [b"\xff\xfe not utf-8", b"[1, 2]", b'"text"', b"[" * 100000, b"{ broken"])
def test_unreadable_cache_files_are_measured_again(monkeypatch, tmp_path, content):
    monkeypatch.setenv("TILECRAFT_CACHE", str(tmp_path))
    path = C.cache_path(GPU)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    assert C.load_cached(GPU) is None
    monkeypatch.setattr(C, "probe", lambda info, matmul=True, progress=None: {"copy_TBps": 4.2, "matmul_TFLOPs": {}})
    assert C.ceilings(GPU, matmul=False)["copy_TBps"] == 4.2
    assert json.loads(path.read_text())["copy_TBps"] == 4.2


def test_a_cache_that_cannot_be_written_keeps_the_measurements(monkeypatch, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("TILECRAFT_CACHE", str(blocker))
    monkeypatch.setattr(C, "probe", lambda info, matmul=True, progress=None: {"copy_TBps": 4.2, "matmul_TFLOPs": {}})
    with pytest.warns(UserWarning, match="measured but not cached"):
        assert C.ceilings(GPU, matmul=False)["copy_TBps"] == 4.2

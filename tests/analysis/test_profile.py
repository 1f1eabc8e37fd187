"""tilecraft profile: ncu output parsing, efficiencies, and clear errors without ncu or a GPU."""
from __future__ import annotations

import pytest
from typer.testing import CliRunner

from tilecraft.analysis.profile import (
    METRICS,
    ProfileError,
    ProfileResult,
    _named,
    parse_ncu_csv,
    profile_op,
    target_args,
)
from tilecraft.cli import app

# The shape of `ncu --csv --print-units base` output, with the program's own lines mixed in.
NCU_OUT = '''==PROF== Connected to process 123
{"least_fetch_bytes": 1073692800, "least_write_bytes": 1061208000}
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","123","python3","127.0.0.1","laplacian_zmarch_kernel","1","7","(128, 1, 1)","(4, 256, 16)","0","9.0","Command line profiler metrics","dram__bytes_read.sum","byte","1,117,310,720"
"0","123","python3","127.0.0.1","laplacian_zmarch_kernel","1","7","(128, 1, 1)","(4, 256, 16)","0","9.0","Command line profiler metrics","dram__bytes_write.sum","Mbyte","1,044.70"
"0","123","python3","127.0.0.1","laplacian_zmarch_kernel","1","7","(128, 1, 1)","(4, 256, 16)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","us","585.12"
"0","123","python3","127.0.0.1","laplacian_zmarch_kernel","1","7","(128, 1, 1)","(4, 256, 16)","0","9.0","Command line profiler metrics","lts__t_sector_hit_rate.pct","%","71.5"
"0","123","python3","127.0.0.1","laplacian_zmarch_kernel","1","7","(128, 1, 1)","(4, 256, 16)","0","9.0","Command line profiler metrics","l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum","","n/a"
==PROF== Disconnected from process 123
'''


def test_parse_ncu_csv_units_and_separators():
    parsed = parse_ncu_csv(NCU_OUT)
    assert list(parsed) == ["laplacian_zmarch_kernel"]
    m = _named(parsed["laplacian_zmarch_kernel"])
    assert m["dram_read_bytes"] == 1_117_310_720
    assert m["dram_write_bytes"] == pytest.approx(1_044.70e6)
    assert m["time_ns"] == pytest.approx(585_120)
    assert m["l2_hit_rate_pct"] == 71.5
    assert m["smem_bank_conflicts_ld"] is None  # n/a stays unknown, never 0
    assert set(m) == set(METRICS)


def test_efficiencies_are_least_over_measured():
    res = ProfileResult("laplacian", {}, "k", {"dram_read_bytes": 2000.0, "dram_write_bytes": None}, 1000, 500)
    assert res.fetch_efficiency == 0.5
    assert res.write_efficiency is None
    assert res.as_dict()["fetch_efficiency"] == 0.5


def test_profile_without_ncu_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("TILECRAFT_NCU", "/nonexistent/ncu")
    with pytest.raises(ProfileError, match="ncu"):
        profile_op("laplacian", {"variant": "auto", "dtype": "fp64", "order": 2, "shape": [8, 8, 8]})
    with pytest.raises(ValueError, match="cannot profile 'gemv'"):
        target_args("gemv", {})


def test_profile_cli_bad_input_and_no_gpu():
    runner = CliRunner()
    r = runner.invoke(app, ["profile", "nope"])
    assert r.exit_code == 2 and "cannot profile 'nope'" in r.output
    r = runner.invoke(app, ["profile", "laplacian", "--variant", "fastest"])
    assert r.exit_code == 2 and "unknown variant" in r.output
    r = runner.invoke(app, ["profile", "laplacian", "--order", "3"])
    assert r.exit_code == 2 and "order must be even" in r.output
    r = runner.invoke(app, ["profile", "laplacian", "--shape", "512,512"])
    assert r.exit_code == 2 and "NZ,NY,NX" in r.output
    r = runner.invoke(app, ["profile", "matmul", "--layout", "XT"])
    assert r.exit_code == 2 and "unknown layout" in r.output
    r = runner.invoke(app, ["profile", "attention", "--shape", "1,2,64,300"])
    assert r.exit_code == 2 and "at most 256" in r.output
    r = runner.invoke(app, ["profile", "attention", "--dtype", "fp64"])
    assert r.exit_code == 2 and "unknown dtype" in r.output
    for op in ("laplacian", "matmul", "attention"):
        r = runner.invoke(app, ["profile", op])
        assert r.exit_code == 1 and "NVIDIA GPU" in r.output and "Traceback" not in r.output


def test_profile_target_args_for_every_op():
    assert target_args("matmul", {"dtype": "bf16", "layout": "NT", "shape": [8, 16, 32]}) == [
        "matmul", "--dtype", "bf16", "--layout", "NT", "--shape", "8", "16", "32"]
    assert target_args("attention", {"dtype": "fp16", "shape": [1, 2, 64, 64], "causal": True})[-1] == "--causal"

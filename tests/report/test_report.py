"""tilecraft report: the roofline model, the page, the suites' failure handling, the CLI."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tilecraft.cli import app
from tilecraft.hardware.device import DATASHEET
from tilecraft.report import run_report
from tilecraft.report import suites as suites_mod
from tilecraft.report.model import (
    Ceiling,
    Point,
    Roofline,
    datasheet_roofline,
    measured_roofline,
    point_from_record,
    resolve_target,
)
from tilecraft.report.render import render_html, render_markdown
from tilecraft.report.sections import Figure, Section, Table

runner = CliRunner()


# ------------------------------------------------------------------------------------------------
# the model
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name,key", [("h100", "H100"), ("H200", "H200"), ("sm_80", "A100"), ("gfx942", "MI300X"),
                                      ("mi250x", "MI250X"), ("MI300X", "MI300X")])
def test_resolve_target(name, key):
    assert resolve_target(name) == key


def test_resolve_target_unknown_names_close_matches():
    with pytest.raises(ValueError, match="did you mean h100"):
        resolve_target("h10")
    with pytest.raises(ValueError, match="unknown target GPU 'tpu'"):
        resolve_target("tpu")


def test_least_time_is_the_larger_of_memory_and_compute():
    roof = Roofline("X", [Ceiling("copy", 2.0, "datasheet")], [Ceiling("bf16", 100.0, "datasheet")])
    # 2e12 bytes at 2 TB/s: 1 s; 1e12 FLOPs at 100 TFLOP/s: 10 ms -> memory-bound, 1000 ms
    assert roof.least_time_ms(1e12, 2e12, "bf16") == pytest.approx(1000.0)
    # 1e15 FLOPs at 100 TFLOP/s: 10 s -> compute-bound
    assert roof.least_time_ms(1e15, 2e12, "bf16") == pytest.approx(10000.0)
    # no compute roof for the dtype: memory alone
    assert roof.least_time_ms(1e15, 2e12, "fp8") == pytest.approx(1000.0)


def test_measured_ceilings_win_over_the_datasheet():
    roof = measured_roofline("NVIDIA H200", {"copy_TBps": 4.2, "matmul_TFLOPs": {"bf16": 700.0}}, "H200")
    assert roof.best_bandwidth().source == "measured" and roof.best_bandwidth().value == 4.2
    assert roof.peak("bf16").value == 700.0 and roof.peak("bf16").source == "measured"
    assert roof.peak("fp8").source == "datasheet"  # not measured: the datasheet's
    sheet = datasheet_roofline("H100")  # rate x units x clock: within a few % of the vendor's figures
    assert sheet.best_bandwidth().value == pytest.approx(DATASHEET["H100"]["bandwidth_TBps"], rel=0.03)
    assert sheet.peak("bf16").value == pytest.approx(DATASHEET["H100"]["bf16"], rel=0.03)
    assert "SM" in sheet.peak("bf16").formula


def test_point_fraction_of_roof_and_from_record():
    roof = Roofline("X", [Ceiling("copy", 1.0, "measured")], [])
    p = Point("k", "s", flops=1e9, nbytes=1e9, time_ms=2.0)  # least 1 ms at 1 TB/s
    assert p.fraction_of_roof(roof) == pytest.approx(0.5)
    assert p.intensity == 1.0 and p.tbps == pytest.approx(0.5)
    rec = {"suite": "x", "measured": True, "extra": {"ok": True, "flops": 10, "bytes": 20, "time_ms": 1.0}}
    assert point_from_record(rec, "k", None).nbytes == 20
    assert point_from_record({"extra": {"ok": False, "flops": 1, "bytes": 1, "time_ms": 1}}, "k", None) is None
    assert point_from_record({"extra": {"flops": 1}}, "k", None) is None


# ------------------------------------------------------------------------------------------------
# the page
# ------------------------------------------------------------------------------------------------
def _sections() -> list[Section]:
    from tilecraft.report import plots

    ok = Section("a", "Section <A>", source="measured",
                 tables=[Table("T", ["x", "y"], [["1", "2"], ["<b>", "4"]], "cap")],
                 figures=[Figure("F", "bars", plots.bars(["p", "q"], [1.0, None], ylabel="y", title="t"))])
    bad = Section("b", "B", status="failed", message="it broke")
    return [ok, bad]


def test_html_is_self_contained_escaped_and_labelled():
    page = render_html(_sections(), {"device": "dev", "mode": "quick"})
    assert page.startswith("<!DOCTYPE html>")
    assert "<svg" in page and 'data-section="a"' in page and 'data-status="failed"' in page
    assert "Section &lt;A&gt;" in page and "&lt;b&gt;</td>" in page and "<b>" not in page  # user text escaped
    assert "measured on this GPU" in page and "FAILED" in page
    # nothing fetched from elsewhere: no external scripts, styles or images
    assert "<link" not in page and 'src="' not in page and 'href="http' not in page


def test_markdown_lists_every_section_and_table():
    md = render_markdown(_sections(), {"device": "dev", "mode": "quick"})
    assert "## Section <A>" in md and "| x | y |" in md and "| B | failed |" in md


def test_section_rejects_unknown_source():
    with pytest.raises(ValueError, match="source"):
        Section("k", "t", source="guess")


# ------------------------------------------------------------------------------------------------
# running suites: a failure is a failed section, the rest still comes out
# ------------------------------------------------------------------------------------------------
@pytest.fixture
def broken_suite():
    def boom(ctx):
        raise RuntimeError("suite exploded")
    suites_mod.register(suites_mod.Suite("broken", "A broken suite", boom))
    yield "broken"
    suites_mod.SUITES[:] = [s for s in suites_mod.SUITES if s.key != "broken"]


def test_failing_suite_is_reported_and_the_rest_is_written(tmp_path, broken_suite):
    res = run_report("quick", out_dir=tmp_path, only=["device", "ceilings", broken_suite], target="a100")
    keys = {s.key: s for s in res.sections}
    assert keys["broken"].status == "failed" and "suite exploded" in keys["broken"].message
    assert keys["device"].status == "ok"
    assert keys["ceilings"].status == "skipped" and keys["ceilings"].source == "model"  # no GPU here
    assert res.failed == [keys["broken"]]
    doc = json.loads(res.json.read_text())
    assert doc["meta"]["target"] == "A100" and doc["meta"]["measured"] is False
    assert "suite exploded" in res.html.read_text() and res.markdown.exists()


def test_unknown_suite_and_mode_are_errors(tmp_path):
    with pytest.raises(ValueError, match="unknown suite 'nope'"):
        run_report("quick", out_dir=tmp_path, only=["nope"])
    with pytest.raises(ValueError, match="mode"):
        run_report("fast", out_dir=tmp_path)


def test_stencil_suite_in_the_interpreter_checks_and_models(tmp_path):
    res = run_report("quick", out_dir=tmp_path, only=["stencil"], target="h200")
    sec = next(s for s in res.sections if s.key == "stencil")
    assert sec.status == "ok" and sec.source == "interpreter"
    variants = [r["case"]["variant"] for r in sec.records]
    assert "baseline" in variants and "auto" in variants
    assert all(r["measured"] is False for r in sec.records)
    # the model: least traffic at the H200 datasheet bandwidth, every point labelled model
    assert sec.points and not any(p.measured for p in sec.points)
    p = sec.points[0]
    bw = datasheet_roofline("H200").best_bandwidth().value
    assert bw == pytest.approx(DATASHEET["H200"]["bandwidth_TBps"], rel=0.03)
    assert p.time_ms == pytest.approx(p.nbytes / (bw * 1e12) * 1e3)
    roof = next(s for s in res.sections if s.key == "roofline")
    assert roof.source == "model" and roof.figures and roof.figures[0].kind == "roofline"


# ------------------------------------------------------------------------------------------------
# the CLI
# ------------------------------------------------------------------------------------------------
def test_cli_bad_input_is_one_line_and_exit_2(tmp_path):
    r = runner.invoke(app, ["report", "--only", "nope", "--out", str(tmp_path)])
    assert r.exit_code == 2 and "unknown suite 'nope'" in r.output and "Traceback" not in r.output
    r = runner.invoke(app, ["report", "--target", "h10", "--out", str(tmp_path)])
    assert r.exit_code == 2 and "did you mean h100" in r.output


def test_cli_exit_code_says_a_suite_failed(tmp_path, broken_suite):
    r = runner.invoke(app, ["report", "--only", f"device,{broken_suite}", "--out", str(tmp_path)])
    assert r.exit_code == 1, r.output
    assert (tmp_path / "report.html").exists()
    r = runner.invoke(app, ["report", "--only", "device", "--out", str(tmp_path)])
    assert r.exit_code == 0, r.output


# ------------------------------------------------------------------------------------------------
# the page in a real browser
# ------------------------------------------------------------------------------------------------
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


@pytest.fixture(scope="module")
def cpu_report(tmp_path_factory) -> Path:
    """The README's main command as a user runs it on a CPU-only machine: a fresh process without
    TRITON_INTERPRET (the command switches the interpreter on itself), --quick."""
    out = tmp_path_factory.mktemp("report")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, "-m", "tilecraft", "report", "--out", str(out)], env=env,
                          capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "interpreter" in proc.stderr and "wrote" in proc.stdout
    return out


def test_cpu_report_end_to_end(cpu_report):
    doc = json.loads((cpu_report / "report.json").read_text())
    status = {s["key"]: (s["status"], s["source"]) for s in doc["sections"]}
    assert status["stencil"] == ("ok", "interpreter")
    assert status["inspect"] == ("ok", "compiled")
    assert status["gemm"] == ("ok", "interpreter")
    assert status["attention"] == ("ok", "interpreter")
    assert status["wave"] == ("ok", "interpreter")
    suites = {p["suite"] for s in doc["sections"] if s["key"] == "roofline" for p in s["records"]}
    assert {"stencil", "gemm", "attention", "wave"} <= suites  # every family placed on the model's roofline
    assert status["roofline"] == ("ok", "model")
    assert status["sweep"][0] == "skipped" and status["profile"][0] == "skipped"
    assert doc["meta"]["measured"] is False


def test_report_renders_in_headless_chromium(cpu_report, tmp_path):
    exe = _chromium()
    if exe is None:
        if os.environ.get("TILECRAFT_REQUIRE_BROWSER") == "1":
            pytest.fail("TILECRAFT_REQUIRE_BROWSER=1 but no Chromium was found")
        pytest.skip("no Chromium here (CI installs it and sets TILECRAFT_REQUIRE_BROWSER=1)")
    page = (cpu_report / "report.html").resolve()
    flags = [*CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run([exe, *flags, "--dump-dom", page.as_uri()], capture_output=True, text=True,
                         timeout=120, check=False).stdout
    assert 'data-rendered="yes"' in dom, dom[:500]
    body = dom[dom.index("<body"):dom.index(">", dom.index("<body"))]
    drawn = int(body.split('data-plots-drawn="')[1].split('"')[0])
    plots = int(body.split('data-plots="')[1].split('"')[0])
    tables = int(body.split('data-tables="')[1].split('"')[0])
    assert plots >= 1 and drawn == plots  # every plot drew at a real size
    assert tables >= 5
    shot = tmp_path / "shot.png"
    subprocess.run([exe, *flags, f"--screenshot={shot}", "--window-size=1280,2000", page.as_uri()],
                   capture_output=True, timeout=120, check=False)
    assert shot.exists() and shot.stat().st_size > 20_000  # a real picture, not a blank page


# ------------------------------------------------------------------------------------------------
# the GPU branches of the family suites, on records shaped as the bench functions make them
# ------------------------------------------------------------------------------------------------
@pytest.fixture
def gpu_ctx(tmp_path):
    from tilecraft.hardware.device import DeviceInfo
    from tilecraft.report.sections import Context

    info = DeviceInfo(name="NVIDIA H200", backend="cuda", multiprocessors=132, l2_bytes=60 * 2**20,
                      memory_bytes=140 * 2**30, capability="9.0")
    ctx = Context(mode="quick", info=info, target="H200", out_dir=tmp_path)
    ctx.ceilings = {"copy_TBps": 4.25, "matmul_TFLOPs": {"bf16": 700.0}}
    ctx.roofline = measured_roofline(info.name, ctx.ceilings, "H200")
    return ctx


def test_attention_suite_gpu_tables_from_bench_records(gpu_ctx, monkeypatch):
    from tilecraft.bench import attention as ab
    from tilecraft.report.extra_suites import attention_suite

    def fake_bench(shapes, dtype, directions, **kw):
        recs = []
        for s in shapes[:2]:
            for d in directions:
                res = [ab.Timed("tilecraft", True, 1e-3, 2.0, resources=[{"registers": 187, "spills": 0}]),
                       ab.Timed("sdpa-cudnn", True, 1e-3, 1.6), ab.Timed("sdpa-flash", True, 1e-3, 3.0),
                       ab.Timed("sdpa-efficient", False, None, message="unsupported")]
                recs += ab.records_for(s, dtype, d, res, 4.25)
        return recs
    monkeypatch.setattr(ab, "bench", fake_bench)
    sec = attention_suite(gpu_ctx)
    assert sec.status == "ok" and sec.source == "measured"
    table = sec.tables[0]
    row = table.rows[0]
    assert row[table.columns.index("× cuDNN")] == "0.80"  # 1.6 ms / 2.0 ms
    assert row[table.columns.index("regs")] == "187"
    assert row[table.columns.index("sdpa-efficient")] == "–"
    assert sec.figures and sec.figures[0].kind == "heatmap"
    assert sec.points and all(p.measured for p in sec.points)


def test_gemm_suite_gpu_tables_from_bench_records(gpu_ctx, monkeypatch):
    from tilecraft.bench import gemm as gb
    from tilecraft.bench.harness import Record
    from tilecraft.report.extra_suites import gemm_suite

    def fake_run_case(case, info, **kw):
        flops = gb.gemm_flops(case.m, case.n, case.k)
        ms = flops / 700e12 * 1e3
        rec = Record(suite="gemm", case={"dtype": case.dtype, "layout": case.layout, "m": case.m, "n": case.n,
                                         "k": case.k, "batch": 1},
                     metric="TFLOP/s", unit="TFLOP/s", ours=700.0, peer="torch.matmul", peer_value=680.0,
                     extra={"flops": flops, "bytes": gb.gemm_bytes(case.m, case.n, case.k, 2, 2), "time_ms": ms,
                            "rel_err": 1e-3, "kernel": "tma", "fraction_of_peak": 0.7})
        rec.ratio = 700.0 / 680.0
        if case.dtype == "int8":
            rec.extra["failed"] = True
        return rec
    monkeypatch.setattr(gb, "run_case", fake_run_case)
    sec = gemm_suite(gpu_ctx)
    assert sec.status == "failed" and "int8" in sec.message  # a failed check is a failed section
    assert any(r[3] == "FAILED" for r in sec.tables[0].rows)
    assert sec.figures and sec.figures[0].kind == "heatmap"
    assert sec.points and not any(p.label.startswith("int8") for p in sec.points)

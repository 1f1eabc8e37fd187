"""Peak tables (``tilecraft.hardware.peaks``): rate x units x clock against the DATASHEET figures."""
from __future__ import annotations

import json

import pytest
from _mi_cli import mi_invoker

from tilecraft.hardware import peaks
from tilecraft.hardware.device import DATASHEET

# Where a computed peak may differ from the datasheet by more than TOL, and why.
EXPLAINED: dict[tuple[str, str], str] = {}
TOL = 0.03


@pytest.mark.parametrize("device", list(DATASHEET))
def test_every_datasheet_figure_is_reproduced(device):
    sheet = DATASHEET[device]
    checked = 0
    for kind in (*peaks.DTYPES, "bandwidth"):
        ref = sheet.get("bandwidth_TBps" if kind == "bandwidth" else kind)
        if ref is None:
            continue
        got = peaks.peak(device, kind).value
        if (device, kind) not in EXPLAINED:
            assert abs(got / ref - 1) < TOL, (device, kind, got, ref)
        checked += 1
    assert checked >= 7


def test_formula_is_the_product():
    for row in peaks.peak_table():
        p = peaks.peak(row["device"], row["dtype"])
        if row["dtype"] == "bandwidth":
            bits, rate = p.formula.split("-bit")[0], p.formula.split(" x ")[1].split(" Gb/s")[0]
            assert p.value == pytest.approx(int(bits) / 8 * float(rate) / 1000)
            continue
        units, rate, clock = p.formula.split(" x ")
        product = int(units.split()[0]) * float(rate.split()[0]) * float(clock.split()[0]) / 1000
        assert p.value == pytest.approx(product)


def test_rates_come_from_the_instruction_tables():
    from tilecraft.analysis import matrix_instructions as mi

    rate, name = peaks.matrix_rate("cdna3", "bf16")
    assert rate == mi.instruction("cdna3", name).flops_per_unit_per_clock == 2048
    assert peaks.matrix_rate("cdna2", "fp64")[0] == 256 and peaks.matrix_rate("cdna2", "fp8") is None
    assert peaks.matrix_rate("sm90", "fp8")[0] == 8192 and peaks.matrix_rate("sm80", "fp8") is None
    # sparse instructions never set a dense peak
    assert not peaks.matrix_rate("cdna3", "fp16")[1].startswith("v_smfmac")


def test_api_forms_and_bad_input():
    assert peaks.peak("NVIDIA H100 80GB HBM3", "torch.bfloat16") == peaks.peak("h100", "bf16")
    assert peaks.peak("AMD Instinct MI300X", "float16").unit == "TFLOP/s"
    assert peaks.peak("mi300x", "int8").unit == "TOPS"
    assert peaks.peak("H200", "memory") == peaks.bandwidth("H200")
    assert peaks.peak("A100", "fp64_vector").value < peaks.peak("A100", "fp64").value
    with pytest.raises(ValueError, match="no fp8"):
        peaks.peak("A100", "fp8")
    with pytest.raises(ValueError, match="no tf32"):
        peaks.peak("MI250X", "tf32")
    with pytest.raises(ValueError, match="did you mean MI300X"):
        peaks.peak("mi30x", "bf16")
    with pytest.raises(ValueError, match="did you mean bf16"):
        peaks.peak("H100", "bf61")
    rows = peaks.peak_table("mi250x")
    assert {r["device"] for r in rows} == {"MI250X"} and "fp8" not in {r["dtype"] for r in rows}


def test_cli_peaks():
    cli = mi_invoker()
    r = cli("peaks", "h100")
    assert r.exit_code == 0 and "989.43" in r.output and "tensor clock" in r.output
    r = cli("peaks", "--json")
    assert r.exit_code == 0 and len({d["device"] for d in json.loads(r.output)}) == len(peaks.DEVICES)
    r = cli("peaks", "h1000")
    assert r.exit_code == 2 and r.output.startswith("error:") and len(r.output.strip().splitlines()) == 1


@pytest.mark.parametrize("name", ["NVIDIA H100 PCIe", "NVIDIA H100 NVL", "NVIDIA H200 NVL", "NVIDIA A100-PCIE-40GB",
                                  "NVIDIA A100-SXM4-40GB", "NVIDIA GH200 480GB"])
def test_variants_the_datasheet_does_not_describe_get_no_sxm_figures(name):
    """An H100 PCIe took the SXM part's 989 TFLOP/s and 3.35 TB/s before (a substring match)."""
    from tilecraft.hardware.device import datasheet_key

    assert datasheet_key(name) is None
    with pytest.raises(ValueError):
        peaks.resolve_device(name)


@pytest.mark.parametrize("name,key", [("NVIDIA H100 80GB HBM3", "H100"), ("NVIDIA H200", "H200"),
                                      ("NVIDIA A100-SXM4-80GB", "A100"), ("AMD Instinct MI300X", "MI300X")])
def test_the_tabulated_parts_resolve(name, key):
    from tilecraft.hardware.device import datasheet_key

    assert datasheet_key(name) == key and peaks.resolve_device(name) == key

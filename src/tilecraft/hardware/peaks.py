"""Peak rates computed as rate x units x clock, and peak memory bandwidth as bus width x data rate.

The matrix rate per SM/CU per clock comes from the instruction tables of
``tilecraft.analysis.matrix_instructions`` (the fastest dense instruction taking the dtype); the
vector (FMA) rates, unit counts, clocks and memory buses are device facts from the vendors'
datasheets and whitepapers, kept here. ``tests/hardware/test_peaks.py`` checks every product against
``DATASHEET`` in ``hardware/device.py``.

    peak("H100", "bf16")   # PeakRate(value=989.43, unit='TFLOP/s',
                           #   formula='132 SM x 4096 FLOP/clk x 1.83 GHz (mma.sync.m16n8k16.bf16; tensor clock)')
    peak("MI300X", "bandwidth").value   # 5.3248 (TB/s: 8192-bit HBM3 / 8 x 5.2 Gb/s)
    peak_table("mi250x")                # every dtype the device has, with the DATASHEET ratio

Values are dense (no 2:4 sparsity), in TFLOP/s (TOPS for int8) and TB/s (10^12 bytes per second).
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from functools import cache

from tilecraft.analysis import matrix_instructions as mi
from tilecraft.hardware.device import DATASHEET_OTHER_VARIANTS, datasheet_key

DTYPES = ("fp64", "fp64_vector", "fp32", "tf32", "bf16", "fp16", "fp8", "int8")

# the instruction input types (as the tables spell them) that count for a dtype
_MATRIX_TYPES = {
    "fp64": ("fp64", "f64"), "fp32": ("fp32",), "tf32": ("xf32", "tf32"), "bf16": ("bf16",),
    "fp16": ("fp16", "f16"), "fp8": ("amd_fp8", "amd_bf8", "fp8", "bf8", "e4m3", "e5m2"),
    "int8": ("int8", "iu8", "s8", "u8"),
}

_DTYPE_ALIASES = {
    "float64": "fp64", "f64": "fp64", "double": "fp64", "float32": "fp32", "f32": "fp32", "float": "fp32",
    "xf32": "tf32", "bfloat16": "bf16", "float16": "fp16", "f16": "fp16", "half": "fp16",
    "e4m3": "fp8", "e5m2": "fp8", "float8_e4m3fn": "fp8", "float8_e5m2": "fp8", "s8": "int8", "i8": "int8",
    "mem": "bandwidth", "memory": "bandwidth", "hbm": "bandwidth",
}


@dataclass(frozen=True)
class PeakRate:
    """A peak: ``value`` in ``unit`` (TFLOP/s, TOPS or TB/s), and the product that gave it."""

    value: float
    unit: str
    formula: str


@dataclass(frozen=True)
class Device:
    key: str
    arch: str                  # matrix_instructions architecture
    units: int                 # SMs or CUs
    unit_name: str
    clock_ghz: float           # boost clock
    vector_flops: dict[str, int]   # FMA-unit FLOPs per SM/CU per clock: fp64, fp32
    bus_bits: int              # memory bus width
    data_rate_gbps: float      # per pin
    memory: str
    tensor_clock_ghz: float | None = None   # where the vendor quotes matrix peaks at another clock
    source: str = ""
    notes: tuple[str, ...] = field(default=())


# Sources: NVIDIA H100/H200 SXM and A100 SXM 80GB datasheets and the Hopper/Ampere whitepapers;
# AMD Instinct MI250X (OAM, both GCDs) and MI300X (OAM) datasheets and the CDNA2/CDNA3 whitepapers.
DEVICES: dict[str, Device] = {
    "H100": Device(
        "H100", "sm90", 132, "SM", 1.98, {"fp64": 128, "fp32": 256}, 5120, 5.23, "HBM3",
        tensor_clock_ghz=1.83, source="NVIDIA H100 SXM5 datasheet / Hopper whitepaper",
        notes=(("NVIDIA's dense tensor-core peaks for tf32 and narrower types (989 TFLOP/s bf16) are "
                "quoted at 1.83 GHz; FP64 (tensor and FMA) and FP32 at the 1.98 GHz boost"),)),
    "H200": Device(
        "H200", "sm90", 132, "SM", 1.98, {"fp64": 128, "fp32": 256}, 6144, 6.25, "HBM3e",
        tensor_clock_ghz=1.83, source="NVIDIA H200 SXM datasheet (H100's SMs and clocks)",
        notes=("compute as H100 SXM; memory 141 GB HBM3e",)),
    "A100": Device(
        "A100", "sm80", 108, "SM", 1.41, {"fp64": 64, "fp32": 128}, 5120, 3.186, "HBM2e",
        source="NVIDIA A100 SXM 80GB datasheet / Ampere whitepaper"),
    "MI250X": Device(
        "MI250X", "cdna2", 220, "CU", 1.70, {"fp64": 128, "fp32": 128}, 8192, 3.2, "HBM2e",
        source="AMD Instinct MI250X datasheet (both GCDs; one ROCm device is one GCD: half)",
        notes=("fp32 FMA is 256 FLOP/CU/clk when packed (v_pk_fma_f32)",)),
    "MI300X": Device(
        "MI300X", "cdna3", 304, "CU", 2.10, {"fp64": 128, "fp32": 256}, 8192, 5.2, "HBM3",
        source="AMD Instinct MI300X datasheet"),
}

_NAMES = {**{k.lower(): k for k in DEVICES}, "h100-sxm": "H100", "h100 sxm": "H100", "h200-sxm": "H200",
          "a100-sxm": "A100", "mi250": "MI250X", "mi300": "MI300X"}


def resolve_device(name: str) -> str:
    """The DEVICES key for ``name`` ('h100', 'NVIDIA H100 80GB HBM3', 'AMD Instinct MI300X' ...);
    ValueError with close matches when unknown."""
    text = str(name).strip()
    if text.lower() in _NAMES:
        return _NAMES[text.lower()]
    key = datasheet_key(text)  # inside a full device name (the rule the device's own datasheet lookup uses)
    if key is not None:
        return key
    if any(v in text.upper() for v in DATASHEET_OTHER_VARIANTS):
        raise ValueError(f"{name!r} is a variant whose rates differ from the tabulated parts (known: "
                         f"{', '.join(DEVICES)}; the H100/H200 figures are the SXM parts)")
    close = difflib.get_close_matches(text.lower(), list(_NAMES), n=4, cutoff=0.5)
    hint = f"; did you mean {', '.join(dict.fromkeys(_NAMES[c] for c in close))}?" if close else ""
    raise ValueError(f"unknown device {name!r}{hint} (known: {', '.join(DEVICES)})")


def resolve_dtype(dtype: object) -> str:
    """'bf16' for 'bf16', 'bfloat16', torch.bfloat16 ...; 'bandwidth' for memory."""
    text = str(dtype).strip().lower().removeprefix("torch.")
    text = _DTYPE_ALIASES.get(text, text)
    if text in DTYPES or text == "bandwidth":
        return text
    close = difflib.get_close_matches(text, [*DTYPES, "bandwidth"], n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise ValueError(f"unknown dtype {dtype!r}{hint} (known: {', '.join(DTYPES)}, bandwidth)")


@cache
def matrix_rate(arch: str, dtype: str) -> tuple[float, str] | None:
    """(FLOPs per SM/CU per clock, instruction) of the fastest dense matrix instruction of ``arch``
    whose A input is ``dtype``; None when the architecture has none."""
    best: tuple[float, str] | None = None
    for ins in mi.list_instructions(arch):
        if ins.sparse or ins.in_type not in _MATRIX_TYPES.get(dtype, ()):
            continue
        rate = ins.flops_per_unit_per_clock
        if rate is not None and (best is None or rate > best[0]):
            best = (rate, ins.name)
    return best


def _fmt_ghz(x: float) -> str:
    return f"{x:g} GHz"


def bandwidth(device: str) -> PeakRate:
    """Peak memory bandwidth: bus bits / 8 x data rate per pin."""
    d = DEVICES[resolve_device(device)]
    value = d.bus_bits / 8 * d.data_rate_gbps / 1000
    return PeakRate(value, "TB/s", f"{d.bus_bits}-bit {d.memory} / 8 x {d.data_rate_gbps:g} Gb/s")


def peak(device_key: str, dtype: object) -> PeakRate:
    """Peak rate of ``device_key`` for ``dtype`` (fp64, fp64_vector, fp32, tf32, bf16, fp16, fp8,
    int8; 'bandwidth' gives :func:`bandwidth`): units x FLOPs per unit per clock x clock. The
    matrix rate is the fastest dense instruction's; fp64 and fp32 take the larger of matrix and
    vector (FMA) rates, fp64_vector the FMA rate only. ValueError for a dtype the device cannot
    run on its matrix or vector units."""
    key = resolve_device(device_key)
    kind = resolve_dtype(dtype)
    if kind == "bandwidth":
        return bandwidth(key)
    d = DEVICES[key]
    unit = "TOPS" if kind == "int8" else "TFLOP/s"
    candidates: list[tuple[float, float, str]] = []   # (flops/unit/clk, clock, what)
    vec = d.vector_flops.get("fp64" if kind == "fp64_vector" else kind)
    if kind in ("fp64", "fp32", "fp64_vector") and vec:
        candidates.append((vec, d.clock_ghz, "FMA"))
    if kind != "fp64_vector":
        mat = matrix_rate(d.arch, kind)
        if mat is not None:
            clock = d.tensor_clock_ghz if (d.tensor_clock_ghz and kind != "fp64") else d.clock_ghz
            candidates.append((mat[0], clock, mat[1]))
    if not candidates:
        raise ValueError(f"{key} ({d.arch}) has no {kind} matrix instruction and no {kind} vector peak")
    rate, clock, what = max(candidates, key=lambda c: c[0] * c[1])
    value = d.units * rate * clock / 1000
    why = "tensor clock" if clock != d.clock_ghz else "boost clock"
    formula = (f"{d.units} {d.unit_name} x {rate:g} FLOP/clk x {_fmt_ghz(clock)} "
               f"({what}; {why})")
    return PeakRate(value, unit, formula)


def peak_table(device_key: str | None = None) -> list[dict]:
    """One row per (device, dtype) that the device has, plus its bandwidth: device, dtype, value,
    unit, formula, and the DATASHEET figure with the ratio where hardware/device.py lists one."""
    from tilecraft.hardware.device import DATASHEET

    keys = [resolve_device(device_key)] if device_key else list(DEVICES)
    rows = []
    for key in keys:
        sheet = DATASHEET.get(key, {})
        for kind in (*DTYPES, "bandwidth"):
            try:
                p = peak(key, kind)
            except ValueError:
                continue
            ref = sheet.get("bandwidth_TBps" if kind == "bandwidth" else kind)
            rows.append({"device": key, "dtype": kind, "value": round(p.value, 2), "unit": p.unit,
                         "formula": p.formula, "datasheet": ref,
                         "ratio": round(p.value / ref, 3) if ref else None})
    return rows

"""Device detection and datasheet facts.

Datasheet peaks are leads for a roofline; the measured ceilings (``tilecraft.hardware.ceilings``) are
what every figure of merit is compared against.
"""
from __future__ import annotations

import functools
import platform
import re
from dataclasses import asdict, dataclass, field

import torch

# Dense datasheet peaks: memory bandwidth in TB/s, matrix/vector rates in TFLOP/s (TOPS for int8).
# NVIDIA: H100/H200 SXM datasheets; A100 SXM 80GB. AMD: per device (MI250X: both GCDs; a single
# GCD, which is what one ROCm device is, has half). The project specification lists these.
DATASHEET: dict[str, dict[str, float]] = {
    "H100": {"bandwidth_TBps": 3.35, "fp64": 67.0, "fp64_vector": 34.0, "fp32": 67.0, "tf32": 495.0,
             "bf16": 989.0, "fp16": 989.0, "fp8": 1979.0, "int8": 1979.0, "sms": 132},
    "H200": {"bandwidth_TBps": 4.8, "fp64": 67.0, "fp64_vector": 34.0, "fp32": 67.0, "tf32": 495.0,
             "bf16": 989.0, "fp16": 989.0, "fp8": 1979.0, "int8": 1979.0, "sms": 132},
    "A100": {"bandwidth_TBps": 2.04, "fp64": 19.5, "fp64_vector": 9.7, "fp32": 19.5, "tf32": 156.0,
             "bf16": 312.0, "fp16": 312.0, "int8": 624.0, "sms": 108},
    "MI250X": {"bandwidth_TBps": 3.2, "fp64": 95.7, "fp64_vector": 47.9, "fp32": 95.7, "fp16": 383.0,
               "bf16": 383.0, "int8": 383.0, "cus": 220},
    "MI300X": {"bandwidth_TBps": 5.3, "fp64": 163.4, "fp64_vector": 81.7, "fp32": 163.4, "tf32": 653.7,
               "bf16": 1307.4, "fp16": 1307.4, "fp8": 2614.9, "int8": 2614.9, "cus": 304},
}


#: Variants whose rates and bandwidth differ from the DATASHEET's parts (SXM, 80 GB A100): no datasheet for them,
#: rather than the SXM part's figures (an H100 PCIe has about 756 dense bf16 TFLOP/s and 2.0 TB/s, not 989 / 3.35).
DATASHEET_OTHER_VARIANTS = ("PCIE", "NVL", "A100-SXM4-40GB", "A100 40GB")


def datasheet_key(name: str) -> str | None:
    """Map a device name ('NVIDIA H100 80GB HBM3', 'AMD Instinct MI300X', ...) to a DATASHEET key: the key as a
    whole word ('GH200' is not an H200), None for variants the datasheet does not describe (PCIe, NVL, 40 GB A100)."""
    upper = str(name).upper()
    if any(v in upper for v in DATASHEET_OTHER_VARIANTS):
        return None
    for key in ("H200", "H100", "A100", "MI300X", "MI250X"):
        if re.search(rf"(?<![0-9A-Z]){key}(?![0-9A-Z])", upper):
            return key
    return None


@dataclass(frozen=True)
class DeviceInfo:
    """What tilecraft needs to know of the machine it runs on."""

    name: str
    backend: str  # "cuda", "hip" or "cpu"
    multiprocessors: int | None = None  # SMs (NVIDIA) or CUs (AMD)
    l2_bytes: int | None = None
    memory_bytes: int | None = None
    capability: str | None = None  # "9.0" or "gfx942"
    versions: dict[str, str] = field(default_factory=dict)

    @property
    def is_gpu(self) -> bool:
        return self.backend in ("cuda", "hip")

    @property
    def datasheet(self) -> dict[str, float] | None:
        key = datasheet_key(self.name)
        return DATASHEET.get(key) if key else None

    def as_dict(self) -> dict:
        d = asdict(self)
        d["datasheet_key"] = datasheet_key(self.name)
        return d


def l2_bytes(device: torch.device | str) -> int | None:
    """The L2 cache size of a CUDA device (the current one when no index is given), None elsewhere."""
    device = torch.device(device)
    if device.type != "cuda":
        return None
    return _l2_bytes_of(device.index if device.index is not None else torch.cuda.current_device())


@functools.lru_cache(maxsize=None)
def _l2_bytes_of(index: int) -> int | None:
    return int(getattr(torch.cuda.get_device_properties(index), "L2_cache_size", 0)) or None


def software_versions() -> dict[str, str]:
    versions = {"python": platform.python_version(), "torch": torch.__version__}
    try:
        import triton

        versions["triton"] = triton.__version__
    except ImportError:  # pragma: no cover - triton is a dependency
        versions["triton"] = "missing"
    if torch.version.cuda:
        versions["cuda"] = torch.version.cuda
    if torch.version.hip:
        versions["hip"] = torch.version.hip
    return versions


def detect(index: int = 0) -> DeviceInfo:
    """The GPU torch sees at ``index`` (cuda or ROCm), else the CPU."""
    versions = software_versions()
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(index)
        backend = "hip" if torch.version.hip else "cuda"
        capability = getattr(props, "gcnArchName", None) if backend == "hip" else f"{props.major}.{props.minor}"
        return DeviceInfo(
            name=props.name, backend=backend, multiprocessors=props.multi_processor_count,
            l2_bytes=int(getattr(props, "L2_cache_size", 0)) or None, memory_bytes=int(props.total_memory),
            capability=capability, versions=versions,
        )
    return DeviceInfo(name=platform.processor() or platform.machine() or "cpu", backend="cpu", versions=versions)

"""``tilecraft inspect``: compile kernels for GPUs that are not here and tabulate what came out.

* :func:`inspect_stencil` compiles Laplacian variants (the ladder, ``auto``) for several targets;
* :func:`inspect_gemm` and :func:`inspect_attention` compile what ``tilecraft.matmul`` and
  ``tilecraft.attention`` would launch on each target, with the configuration chosen there;
* :func:`inspect_function` compiles a user's own ``@triton.jit`` function, given by a dotted module
  name or a ``.py`` file path, a signature and constexprs;
* :func:`render_text` (a rich table), :func:`render_markdown`, :func:`render_json` show the rows.

Each (kernel, target) pair is one :func:`tilecraft.analysis.compiled.cross_compile`, i.e. one child
process; the pairs run on a small thread pool (the threads only wait on their children). A row
carries the :class:`~tilecraft.analysis.compiled.KernelResources` (registers, spills, scratch,
shared memory / LDS, occupancy, instruction census) or, when that compile failed, its error.
"""
from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any

from tilecraft.analysis.compiled import (
    TARGETS,
    KernelResources,
    census_summary,
    check_function,
    cross_compile,
)

__all__ = [
    "DEFAULT_TARGETS",
    "GEMM_LAYOUTS",
    "GEMM_TARGETS",
    "InspectRow",
    "attention_jobs",
    "error_summary",
    "gemm_jobs",
    "inspect_attention",
    "inspect_function",
    "inspect_gemm",
    "inspect_stencil",
    "parse_constexprs",
    "parse_signature",
    "parse_targets",
    "render_json",
    "render_markdown",
    "render_text",
    "run_compiles",
]

DEFAULT_TARGETS = ("sm90", "sm80", "gfx942", "gfx90a")

_TYPE = re.compile(r"\*?(i1|i8|i16|i32|i64|u1|u8|u16|u32|u64|fp8e4nv|fp8e5|fp8e4b15|fp8e4b8|fp8e5b16|"
                   r"fp16|bf16|fp32|fp64)(:(16|1))?|constexpr")


@dataclass(frozen=True)
class InspectRow:
    """One compile: ``label`` names the kernel / configuration, ``resources`` the result (its
    ``error`` set when the compile failed)."""

    label: str
    target: str
    resources: KernelResources

    @property
    def error(self) -> str | None:
        return self.resources.error

    def as_dict(self) -> dict:
        d = {"label": self.label, **self.resources.as_dict()}
        d["summary"] = census_summary(self.resources.census) if self.resources.census is not None else None
        return d


# ------------------------------------------------------------------------------------------------
# argument parsing (ValueError with a one-line message for bad input)
# ------------------------------------------------------------------------------------------------


def parse_targets(text: str | Sequence[str]) -> list[str]:
    """``"sm90,gfx942"`` (or a list) -> validated target names, in order, without repeats."""
    names = text.split(",") if isinstance(text, str) else list(text)
    names = list(dict.fromkeys(n.strip() for n in names if n.strip()))
    unknown = [n for n in names if n not in TARGETS]
    if unknown or not names:
        raise ValueError(f"unknown target(s) {', '.join(unknown) or repr(text)}; choose from {','.join(TARGETS)}")
    return names


def _assignments(text: str, what: str, example: str):
    """(name, value, item) of each comma-separated ``NAME=VALUE`` in ``text``."""
    for item in (p.strip() for p in text.split(",")):
        if not item:
            continue
        name, eq, value = (s.strip() for s in item.partition("="))
        if not eq or not name.isidentifier() or not value:
            raise ValueError(f"bad {what} {item!r}: expected NAME=VALUE, e.g. {example}")
        yield name, value, item


def parse_signature(text: str) -> dict[str, str]:
    """``"x_ptr=*fp32:16,n=i32"`` -> ``{"x_ptr": "*fp32:16", "n": "i32"}`` (types checked)."""
    sig: dict[str, str] = {}
    for name, ty, _ in _assignments(text, "signature entry", "'x_ptr=*fp32,n=i32'"):
        if not _TYPE.fullmatch(ty):
            raise ValueError(f"bad type {ty!r} for {name!r}: expected e.g. *fp32, *fp16:16, i32, i64:16, fp32")
        if name in sig:
            raise ValueError(f"argument {name!r} appears twice in the signature")
        sig[name] = ty
    return sig


def _constexpr_value(text: str) -> object:
    if text in ("True", "true"):
        return True
    if text in ("False", "false"):
        return False
    if text == "None":
        return None
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    if text.startswith("tl."):
        import triton.language as tl
        value = getattr(tl, text[3:], None)
        if type(value).__name__ != "dtype":
            raise ValueError(f"{text!r} is not a triton.language dtype")
        return value
    return text


def parse_constexprs(items: Sequence[str]) -> dict[str, object]:
    """``["BLOCK=128", "DTYPE=tl.float16"]`` -> ``{"BLOCK": 128, "DTYPE": tl.float16}``; an item may
    also hold several, comma separated. Values: int, float, True/False/None, ``tl.<dtype>``, else str."""
    out: dict[str, object] = {}
    for item in items:
        for name, value, _ in _assignments(item, "constexpr", "BLOCK=128"):
            out[name] = _constexpr_value(value)
    return out


# ------------------------------------------------------------------------------------------------
# compiling
# ------------------------------------------------------------------------------------------------

Job = tuple[str, str, Callable[[], KernelResources]]


def _default_workers() -> int:
    return max(2, min(8, 2 * (os.cpu_count() or 1)))  # the children wait on disk and ptxas too


def run_compiles(jobs: Sequence[Job], *, workers: int | None = None,
                 progress: Callable[[InspectRow], None] | None = None) -> list[InspectRow]:
    """Run ``(label, target, compile)`` jobs on a thread pool; rows in the jobs' order. ``progress``
    is called (in the calling thread) with each row as it finishes."""
    rows: list[InspectRow | None] = [None] * len(jobs)
    with ThreadPoolExecutor(max_workers=workers or _default_workers()) as pool:
        futures = {pool.submit(fn): i for i, (_, _, fn) in enumerate(jobs)}
        for fut in as_completed(futures):
            i = futures[fut]
            label, target, _ = jobs[i]
            try:
                res = fut.result()
            except Exception as exc:  # noqa: BLE001 - a failure of one pair is that row's error
                res = KernelResources(target=target, kernel=label, num_warps=0, registers=None, agprs=None,
                                      sgprs=None, spills=None, scratch_bytes=None, shared_bytes=None,
                                      occupancy=None, occupancy_unit="", error=f"{type(exc).__name__}: {exc}")
            rows[i] = InspectRow(label, target, res)
            if progress is not None:
                progress(rows[i])
    return [r for r in rows if r is not None]


def _stencil_label(variant: str, cfg: Any) -> str:
    if cfg.kernel in ("zmarch", "rows"):
        shape = f"{cfg.block_z}x{cfg.block_y}x{cfg.block_x}"
    else:
        shape = f"{cfg.block_y}x{cfg.block_x}"
    extra = [f"w{cfg.num_warps}"]
    if cfg.nontemporal:
        extra.append("nt")
    if cfg.maxnreg:
        extra.append(f"maxnreg={cfg.maxnreg}")
    return f"{variant} ({cfg.kernel} {shape} {' '.join(extra)})"


def stencil_jobs(variants: Sequence[str], dtype: str, order: int, shape: tuple[int, int, int],
                 targets: Sequence[str]) -> list[Job]:
    """The (label, target, compile) jobs of Laplacian ``variants`` (``reference`` is skipped: it
    is no Triton kernel) for a grid of ``shape`` in ``dtype`` ("fp64" / "fp32"), as a launch on a
    freshly allocated contiguous grid would compile them. A variant with several launches
    (subdomains) is represented by its first launch's kernel."""
    import torch

    from tilecraft.ops import stencil as ops

    torch_dtype = {"fp64": torch.float64, "fp32": torch.float32}.get(str(dtype))
    if torch_dtype is None:
        raise ValueError(f"unknown dtype {dtype!r}; choose fp64 or fp32")
    unknown = [v for v in variants if v not in ops.VARIANTS]
    if unknown:
        raise ValueError(f"unknown variant(s) {', '.join(unknown)}; choose from {','.join(ops.VARIANTS)}")
    targets = parse_targets(targets)
    u = torch.empty(shape, dtype=torch_dtype, device="meta")
    out = torch.empty(shape, dtype=torch_dtype, device="meta")
    jobs: list[Job] = []
    for variant in variants:
        if variant == "reference":
            continue
        cfg = ops.config_for_tensors(variant, u, out, order)  # meta tensors: contiguous, aligned pointers
        launch = ops.launch_plan(u, out, order, (1.0, 1.0, 1.0), cfg)[0]
        fn = getattr(launch.kernel, "fn", launch.kernel)
        sig = ops.compile_signature(launch)
        label = _stencil_label(variant, cfg)
        for target in targets:
            def job(fn=fn, sig=sig, launch=launch, target=target) -> KernelResources:
                return cross_compile(fn.__module__, fn.__name__, sig, launch.constexprs, target,
                                     num_warps=launch.options["num_warps"],
                                     num_stages=launch.options.get("num_stages", 3),
                                     maxnreg=launch.options.get("maxnreg"))
            jobs.append((label, target, job))
    return jobs


def inspect_stencil(variants: Sequence[str], dtype: str, order: int, shape: tuple[int, int, int],
                    targets: Sequence[str] = DEFAULT_TARGETS, *, workers: int | None = None,
                    progress: Callable[[InspectRow], None] | None = None) -> list[InspectRow]:
    """Rows (variant x target) of the Laplacian ``variants`` compiled for ``targets``."""
    return run_compiles(stencil_jobs(variants, dtype, order, shape, targets), workers=workers, progress=progress)


# GEMM: the GPU family and SM/CU count tilecraft's config choice sees on each target (H100/H200,
# A100, MI300X, one MI250X GCD): the persistent TMA grid and the small-problem tiles depend on it.
GEMM_TARGETS: dict[str, tuple[str, int]] = {"sm90": ("sm90", 132), "sm80": ("sm80", 108),
                                            "gfx942": ("cdna", 304), "gfx90a": ("cdna", 110)}
GEMM_LAYOUTS = ("NN", "NT", "TN", "TT")


def _gemm_label(kernel: Any, cfg: Any, launch: Any) -> str:
    name = getattr(kernel, "__name__", str(kernel))
    if name == "splitk_reduce_kernel":
        c = launch.constexprs
        return f"{name} ({c['BLOCK_M']}x{c['BLOCK_N']} w{launch.options['num_warps']}, split {c['SPLIT_K']})"
    return f"{name} ({cfg.short()})"


def gemm_jobs(dtype: str, shape: tuple[int, int, int], layout: str, targets: Sequence[str], *,
              config: Any = None, sms: int | None = None) -> list[Job]:
    """The (label, target, compile) jobs of ``tilecraft.matmul`` on (M, K) x (K, N) operands of
    ``dtype`` (a ``tilecraft.bench.gemm.DTYPES`` name: bf16, fp16, tf32, fp32, fp32-accurate, fp64,
    int8, fp8, fp8_e5m2) in BLAS ``layout`` (NN, NT, TN, TT), as freshly allocated tensors: per
    target, the configuration tilecraft chooses there without a tuning cache (``config``, a
    ``GemmConfig``, pins one) and the kernel(s) its launch compiles (the persistent TMA kernel on
    sm90 where it applies, the pointer kernel elsewhere; split-K adds its reduction kernel). The
    launch arguments come from ``tilecraft.ops.gemm.target_plan``, the code a launch runs.
    ``sms`` replaces the SM/CU count of :data:`GEMM_TARGETS` (another model of the GPU)."""
    from tilecraft.bench import gemm as bench
    from tilecraft.ops import gemm as ops

    if dtype not in bench.DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}; choose from {','.join(bench.DTYPES)}")
    if layout not in GEMM_LAYOUTS:
        raise ValueError(f"unknown layout {layout!r}; choose from {','.join(GEMM_LAYOUTS)}")
    if len(shape) != 3 or any(not isinstance(x, int) or x <= 0 for x in shape):
        raise ValueError(f"shape must be three positive integers M N K, got {' '.join(map(str, shape))}")
    targets = parse_targets(targets)
    m, n, k = shape
    try:
        a, b = bench.make_operands(m, n, k, dtype, layout, "meta")
    except RuntimeError as exc:  # e.g. a storage size past int64
        raise ValueError(f"shape {m} {n} {k} is too large: {str(exc).splitlines()[0]}") from None
    kwargs = bench.call_kwargs(dtype, m, n, "meta")
    jobs: list[Job] = []
    for target in targets:
        arch, units = GEMM_TARGETS[target]
        _, cfg, plan = ops.target_plan(a, b, arch, sms=sms or units, cfg=config, **kwargs)
        for launch in plan:
            fn = getattr(launch.kernel, "fn", launch.kernel)
            sig = ops.compile_signature(launch)

            def job(fn=fn, sig=sig, launch=launch, target=target) -> KernelResources:
                return cross_compile(fn.__module__, fn.__name__, sig, launch.constexprs, target,
                                     num_warps=launch.options["num_warps"],
                                     num_stages=launch.options.get("num_stages", 3))
            jobs.append((_gemm_label(fn, cfg, launch), target, job))
    return jobs


def inspect_gemm(dtype: str, shape: tuple[int, int, int], layout: str = "NN",
                 targets: Sequence[str] = DEFAULT_TARGETS, *, config: Any = None, workers: int | None = None,
                 progress: Callable[[InspectRow], None] | None = None) -> list[InspectRow]:
    """Rows (target x kernel) of the GEMM tilecraft would run on each target (:func:`gemm_jobs`)."""
    return run_compiles(gemm_jobs(dtype, shape, layout, targets, config=config), workers=workers,
                        progress=progress)


_ATTENTION_LABELS = {"attention_fwd_tma_kernel": "fwd TMA", "attention_fwd_kernel": "fwd",
                     "attention_bwd_dkdv_kernel": "bwd dK/dV", "attention_bwd_dq_kernel": "bwd dQ"}


def attention_jobs(batch: int, heads: int, kv_heads: int, seqlen: int, head_dim: int, causal: bool,
                   dtype: str, targets: Sequence[str], *, deterministic: bool = True) -> list[Job]:
    """The (label, target, compile) jobs of ``tilecraft.attention`` forward and backward on
    contiguous "bhsd" tensors (``seqlen`` queries and keys, ``dtype`` fp16 or bf16), per target
    with the tiles tilecraft chooses there: on sm90 the Gluon forward where it is the default
    (``ops.attention.GLUON_FWD``), then the tensor-descriptor (TMA) forward and the pointer forward
    that take the calls it cannot, elsewhere the pointer forward
    with the tiles for less shared memory. Signatures from
    ``tilecraft.bench.attention.kernel_signatures``."""
    import torch

    from tilecraft.bench import attention as bench
    from tilecraft.ops import attention as ops

    if dtype not in bench.DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}; choose from {','.join(bench.DTYPES)}")
    for name, value in (("batch", batch), ("heads", heads), ("kv-heads", kv_heads), ("seqlen", seqlen)):
        if value <= 0:
            raise ValueError(f"{name} must be positive, got {value}")
    try:
        q = torch.empty(batch, heads, seqlen, head_dim, dtype=bench.DTYPES[dtype], device="meta")
        kv = torch.empty(batch, kv_heads, seqlen, head_dim, dtype=bench.DTYPES[dtype], device="meta")
    except RuntimeError as exc:  # e.g. a storage size past int64
        raise ValueError(f"the tensors are too large: {str(exc).splitlines()[0]}") from None
    ops.validate(q, kv, kv, causal=causal, scale=None, layout="bhsd")  # the checks a call makes
    targets = parse_targets(targets)
    shape = bench.Shape(batch, heads, kv_heads, seqlen, seqlen, head_dim, causal)
    dev = torch.device("cuda")  # the configs of a CUDA/ROCm device; ``hopper`` says which
    jobs: list[Job] = []
    for target in targets:
        hopper = target == "sm90"
        chosen = ops.default_fwd_config(head_dim, dev, hopper=hopper, causal=causal)
        gluon = hopper and chosen.gluon  # the sm90 Gluon forward where it is the default
        tma = hopper and ops.triton_fwd_config(head_dim, dev, hopper=True).tma
        fwd = ops.pointer_fwd_config(head_dim, dev, hopper=hopper)
        kernels = [dict(k, module="tilecraft.kernels.attention")
                   for k in bench.kernel_signatures(shape, bench.DTYPES[dtype], fwd=fwd,
                                                    deterministic=deterministic, tma=tma)]
        order = list(_ATTENTION_LABELS)  # forward (the TMA one first: a contiguous call runs it), backward
        kernels.sort(key=lambda k: order.index(k["kernel"]) if k["kernel"] in order else len(order))
        if gluon:  # what a contiguous call runs first; the Triton forwards take what it cannot
            kernels.insert(0, dict(bench.gluon_kernel_signature(shape, bench.DTYPES[dtype], chosen),
                                   module="tilecraft.kernels.attention_gluon", role="fwd Gluon"))
        for k in kernels:
            cx = k["constexprs"]
            role = k.get("role") or _ATTENTION_LABELS.get(k["kernel"], k["kernel"])
            if (k["kernel"] == "attention_fwd_kernel" and (tma or gluon)) or \
                    (k["kernel"] == "attention_fwd_tma_kernel" and gluon):
                role += " (fallback)"
            # a warp-specialised kernel: num_warps is its default partition; worker warps come on top
            warps = f"w{k['num_warps']}+workers" if k["kernel"].endswith("_ws_kernel") else f"w{k['num_warps']}"
            label = f"{role}: {k['kernel']} ({cx['BLOCK_M']}x{cx['BLOCK_N']} {warps} s{k['num_stages']})"

            def job(k=k, target=target) -> KernelResources:
                return cross_compile(k["module"], k["kernel"], k["signature"], k["constexprs"],
                                     target, num_warps=k["num_warps"], num_stages=k["num_stages"],
                                     maxnreg=k.get("maxnreg"))
            jobs.append((label, target, job))
    return jobs


def inspect_attention(batch: int, heads: int, kv_heads: int, seqlen: int, head_dim: int, causal: bool,
                      dtype: str = "bf16", targets: Sequence[str] = DEFAULT_TARGETS, *, deterministic: bool = True,
                      workers: int | None = None,
                      progress: Callable[[InspectRow], None] | None = None) -> list[InspectRow]:
    """Rows (target x kernel) of the attention kernels on each target (:func:`attention_jobs`)."""
    jobs = attention_jobs(batch, heads, kv_heads, seqlen, head_dim, causal, dtype, targets,
                          deterministic=deterministic)
    return run_compiles(jobs, workers=workers, progress=progress)


def function_jobs(module: str, function: str, signature: dict[str, str], constexprs: dict[str, object],
                  targets: Sequence[str], *, num_warps: int = 4, num_stages: int = 3,
                  maxnreg: int | None = None, check: bool = True) -> list[Job]:
    """Jobs compiling a user's ``@triton.jit`` function for ``targets``. With ``check`` the
    function and its signature are first checked (:func:`~tilecraft.analysis.compiled.check_function`,
    ``ValueError`` for bad input) so that a wrong signature is an input error, not N compile errors."""
    targets = parse_targets(targets)
    if check:
        check_function(module, function, signature, constexprs)
    values = ",".join(f"{k}={v}" for k, v in constexprs.items())
    label = f"{function}" + (f" [{values}]" if values else "") + f" w{num_warps}"
    jobs: list[Job] = []
    for target in targets:
        def job(target=target) -> KernelResources:
            return cross_compile(module, function, signature, constexprs, target, num_warps=num_warps,
                                 num_stages=num_stages, maxnreg=maxnreg)
        jobs.append((label, target, job))
    return jobs


def inspect_function(module: str, function: str, signature: dict[str, str], constexprs: dict[str, object],
                     targets: Sequence[str] = DEFAULT_TARGETS, num_warps: int = 4, *, num_stages: int = 3,
                     maxnreg: int | None = None, check: bool = True, workers: int | None = None,
                     progress: Callable[[InspectRow], None] | None = None) -> list[InspectRow]:
    """Rows (one per target) of ``module.function`` (``module``: dotted name or ``.py`` path)."""
    jobs = function_jobs(module, function, signature, constexprs, targets, num_warps=num_warps,
                         num_stages=num_stages, maxnreg=maxnreg, check=check)
    return run_compiles(jobs, workers=workers, progress=progress)


# ------------------------------------------------------------------------------------------------
# rendering
# ------------------------------------------------------------------------------------------------

COLUMNS = ("target", "kernel / config", "regs", "SGPR", "AGPR", "spills", "scratch", "shared/LDS",
           "occupancy", "matrix instructions", "128-bit loads", "128-bit stores", "nt stores")


def _n(x: Any) -> str:
    return "–" if x is None else str(x)


def _bytes(n: int | None) -> str:
    if n is None:
        return "–"
    return f"{n / 1024:.1f} KiB" if n >= 1024 else f"{n} B"


def _short_matrix(name: str) -> str:
    return name.replace(".sync.aligned", "").replace(".aligned", "")


def row_cells(row: InspectRow) -> list[str]:
    r = row.resources
    if r.error is not None:
        return [row.target, row.label, "error", *[""] * (len(COLUMNS) - 4), error_summary(r.error)][:len(COLUMNS)]
    s = census_summary(r.census) if r.census is not None else None
    amd = TARGETS.get(row.target, ("cuda",))[0] == "hip"
    occ = "–" if r.occupancy is None else f"{r.occupancy:g} {r.occupancy_unit}"
    if s is None:
        matrix = loads = stores = nt = "–"
    else:
        matrix = ", ".join(f"{v}× {_short_matrix(k)}" for k, v in sorted(s["matrix"].items())) or "none"
        loads = f"{s['global_loads_128b']}/{s['global_loads']}"
        stores = f"{s['global_stores_128b']}/{s['global_stores']}"
        nt = str(s["nontemporal_stores"])
    regs = _n(r.registers) + (" VGPR" if amd and r.registers is not None else "")
    return [row.target, row.label, regs, _n(r.sgprs), _n(r.agprs), _n(r.spills), _bytes(r.scratch_bytes),
            _bytes(r.shared_bytes), occ, matrix, loads, stores, nt]


_COMPILATION_ERROR = re.compile(r"^(\w*CompilationError): at (\d+:\d+):$")


def error_summary(text: str, limit: int = 160) -> str:
    """One line for a failed compile: its first line, except for Triton's ``CompilationError``,
    whose first line only says where (the kernel source follows) and whose last says why:
    ``CompilationError at 57:14: input_precision must be one of ...``."""
    lines = [ln.strip() for ln in text.strip().splitlines()]
    line = lines[0] if lines else "failed"
    m = _COMPILATION_ERROR.match(line)
    if m:
        body = lines[1:lines.index("compiler output:")] if "compiler output:" in lines else lines[1:]
        reason = next((ln for ln in reversed(body) if ln and ln != "^"), "")
        line = f"{m.group(1)} at {m.group(2)}: {reason}"
    return line if len(line) <= limit else line[: limit - 1] + "…"


def render_text(rows: Sequence[InspectRow], title: str | None = None):
    """A rich ``Table`` of the rows (print it with a rich ``Console``); failed compiles show
    ``error`` and the error's first line in the last column."""
    from rich.table import Table

    table = Table(title=title, show_lines=False)
    for name in COLUMNS:
        wide = name in ("kernel / config", "matrix instructions")
        table.add_column(name, justify="left" if wide or name == "target" else "right", overflow="fold",
                         no_wrap=not wide)
    for row in rows:
        cells = row_cells(row)
        if row.error is not None:
            cells = [c if i < 2 else f"[red]{c}[/]" for i, c in enumerate(cells)]
        table.add_row(*cells)
    return table


def render_markdown(rows: Sequence[InspectRow], title: str | None = None) -> str:
    """A GitHub markdown table of the rows (loads/stores as 128-bit/all, static counts)."""
    lines = [f"**{title}**", ""] if title else []
    lines.append("| " + " | ".join(COLUMNS) + " |")
    lines.append("|" + "|".join(":--" if c in ("target", "kernel / config", "matrix instructions") else "--:"
                                for c in COLUMNS) + "|")
    for row in rows:
        cells = [c.replace("|", "\\|") for c in row_cells(row)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def render_json(rows: Sequence[InspectRow], **meta: Any) -> str:
    """JSON: ``{**meta, "rows": [row.as_dict(), ...]}`` (every field, the full census, a summary)."""
    return json.dumps({**meta, "rows": [r.as_dict() for r in rows]}, indent=2, default=str)

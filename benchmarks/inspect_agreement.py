"""Do ``tilecraft inspect``'s cross-compiled register counts agree with the GPU's?

On a GPU: launches tilecraft's GEMM (8192^3: bf16 NN, fp32-accurate NN, int8 NT) and attention
forward and backward (bf16, B4 H16 S4096 D128) once each, reads the launched kernels' registers,
spills and shared memory from Triton's compiled-kernel handles
(``analysis.compiled.resources_of_launched``), then cross-compiles the same configurations for
this GPU's target through the inspect functions (``analysis.inspect.gemm_jobs`` with the config
the launch used and this GPU's SM count, ``attention_jobs``) and writes both, kernel by kernel,
as JSON. Without a GPU (or with ``--cpu-only``) only the cross-compile side runs, with the
heuristic configurations.

    PYTHONPATH=src python benchmarks/inspect_agreement.py --out OUT.json [--target sm90] [--cpu-only]

Each case runs in its own try/except (its error is recorded, the others go on) and the JSON is
rewritten after every case. ``spills`` are not comparable between the two sides (launched:
Triton's ``n_spills``, local memory in 4-byte words; cross-compiled: ptxas' spill store + load
bytes), so only registers and shared memory are compared. Exit status 1 when a case failed or a
count disagreed.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path

import torch

from tilecraft.analysis.compiled import TARGETS, resources_of_launched
from tilecraft.analysis.inspect import attention_jobs, gemm_jobs, run_compiles
from tilecraft.bench import attention as ba
from tilecraft.bench import gemm as bg
from tilecraft.bench.harness import git_commit
from tilecraft.hardware.device import software_versions
from tilecraft.ops import attention as oa
from tilecraft.ops import gemm as og

SIZE = 8192
GEMM_CASES = (("bf16", "NN"), ("fp32-accurate", "NN"), ("int8", "NT"))
ATTENTION = ba.Shape(4, 16, 16, 4096, 4096, 128, False)


def device_target() -> str | None:
    """This GPU's cross-compile target (sm90, sm80, gfx942, gfx90a), None without a known GPU."""
    if not torch.cuda.is_available():
        return None
    props = torch.cuda.get_device_properties(0)
    if torch.version.hip:
        name = str(getattr(props, "gcnArchName", "")).split(":")[0]
    else:
        name = {9: "sm90", 8: "sm80"}.get(props.major, f"sm{props.major}{props.minor}")
    return name if name in TARGETS else None


def _launched(handles) -> dict[str, dict]:
    """Launched kernels by name: registers, spills (n_spills), shared memory, warps."""
    out = {}
    for h in handles:
        if h is None:
            continue
        meta = h.metadata
        r = resources_of_launched(h, meta.num_warps)
        out[meta.name] = {"registers": r.registers, "spills": r.spills, "shared_bytes": r.shared_bytes,
                          "num_warps": meta.num_warps}
    return out


def _compare(case: str, rows, launched: dict[str, dict]) -> list[dict]:
    """One record per kernel: the cross-compiled row and the launched kernel of the same name."""
    records, seen = [], set()
    for row in rows:
        r = row.resources
        name = r.kernel
        seen.add(name)
        cross = {"registers": r.registers, "spills": r.spills, "scratch_bytes": r.scratch_bytes,
                 "shared_bytes": r.shared_bytes, "num_warps": r.num_warps, "error": r.error}
        got = launched.get(name)
        rec = {"case": case, "kernel": name, "label": row.label, "target": row.target, "cross": cross,
               "launched": got}
        if got is not None and r.error is None:
            rec["registers_agree"] = got["registers"] == r.registers
            rec["shared_agree"] = got["shared_bytes"] == r.shared_bytes
        records.append(rec)
    for name, got in launched.items():  # launched but not inspected (attention's preprocess kernel)
        if name not in seen:
            records.append({"case": case, "kernel": name, "label": name, "target": None, "cross": None,
                            "launched": got})
    return records


def gemm_case(dtype: str, layout: str, target: str, on_gpu: bool) -> list[dict]:
    config, sms, launched = None, None, {}
    if on_gpu:
        a, b = bg.make_operands(SIZE, SIZE, SIZE, dtype, layout, "cuda")
        kw = bg.call_kwargs(dtype, SIZE, SIZE, "cuda")
        spec = og.validate(a, b, **kw)
        config = og.choose_config(a, b, spec, tune_now=False, scale_a=kw.get("scale_a"), scale_b=kw.get("scale_b"))
        out = torch.empty(spec.out_shape, dtype=spec.out_dtype, device="cuda")
        handles = og.launch(a, b, out, spec, config, None, None, kw.get("scale_a"), kw.get("scale_b"))
        torch.cuda.synchronize()
        launched = _launched(handles)
        sms = torch.cuda.get_device_properties(0).multi_processor_count
        del a, b, out
        torch.cuda.empty_cache()
    rows = run_compiles(gemm_jobs(dtype, (SIZE, SIZE, SIZE), layout, [target], config=config, sms=sms))
    recs = _compare(f"gemm {dtype} {layout} {SIZE}^3", rows, launched)
    for r in recs:
        r["config"] = config.as_dict() if config is not None else None
    return recs


def attention_case(target: str, on_gpu: bool) -> list[dict]:
    s = ATTENTION
    launched: dict[str, dict] = {}
    if on_gpu:
        q, k, v = ba.make_inputs(s, torch.bfloat16, "cuda")
        p = oa.validate(q, k, v, causal=s.causal, scale=None, layout="bhsd")
        out = torch.empty_like(q)
        lse = torch.empty(s.batch, s.heads, s.seqlen_q, device="cuda", dtype=torch.float32)
        fwd = oa.launch_fwd(q, k, v, out, lse, None, None, p, oa.default_fwd_config(s.head_dim, q.device))
        do = torch.randn_like(q)
        dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
        bwd = oa.launch_bwd(do, q, k, v, out, lse, None, dq, dk, dv, None, None, p,
                            oa.default_bwd_config(s.head_dim, q.device), True)
        torch.cuda.synchronize()
        launched = _launched([fwd, *bwd])
    rows = run_compiles(attention_jobs(s.batch, s.heads, s.kv_heads, s.seqlen_q, s.head_dim, s.causal, "bf16",
                                       [target]))
    return _compare(f"attention bf16 {s.label}", rows, launched)


def _line(rec: dict) -> str:
    launched = rec.get("launched") or {}
    cross = rec.get("cross") or {}
    verdict = {True: "agree", False: "DIFFER", None: ""}[rec.get("registers_agree")]
    err = f"  error: {str(cross['error']).splitlines()[0][:120]}" if cross.get("error") else ""
    return (f"{rec['case'][:34]:34} {rec['kernel'][:28]:28} launched {launched.get('registers', '-')!s:>4} regs"
            f" {launched.get('shared_bytes', '-')!s:>7} B | cross {cross.get('registers', '-')!s:>4} regs"
            f" {cross.get('shared_bytes', '-')!s:>7} B  {verdict}{err}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="inspect_agreement.json", help="JSON file to write")
    ap.add_argument("--target", default=None, help="cross-compile target (default: this GPU's; sm90 without one)")
    ap.add_argument("--cpu-only", action="store_true", help="cross-compile only, launch nothing")
    args = ap.parse_args(argv)

    on_gpu = torch.cuda.is_available() and not args.cpu_only
    target = args.target or device_target() or "sm90"
    if target not in TARGETS:
        print(f"error: unknown target {target!r}; choose from {', '.join(TARGETS)}", file=sys.stderr)
        return 2
    doc = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "target": target,
           "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu",
           "launched": on_gpu, "commit": git_commit(), "versions": software_versions(), "records": [],
           "errors": []}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    cases = [(f"gemm {dt} {lay}", lambda dt=dt, lay=lay: gemm_case(dt, lay, target, on_gpu)) for dt, lay in GEMM_CASES]
    cases.append(("attention fwd/bwd D128", lambda: attention_case(target, on_gpu)))
    print(f"# {doc['device']}: launched vs cross-compiled for {target}" + ("" if on_gpu else " (no launches)"))
    for name, run in cases:
        t0 = time.time()
        try:
            recs = run()
            doc["records"] += recs
            for rec in recs:
                print(_line(rec), flush=True)
        except Exception as exc:  # noqa: BLE001 - one case failing must not lose the others
            doc["errors"].append({"case": name, "error": f"{type(exc).__name__}: {exc}",
                                  "traceback": traceback.format_exc()})
            print(f"{name}: FAILED {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}", flush=True)
        print(f"  ({name}: {time.time() - t0:.1f} s)", flush=True)
        out.write_text(json.dumps(doc, indent=2, default=str))
    compared = [r for r in doc["records"] if "registers_agree" in r]
    agree = sum(r["registers_agree"] for r in compared)
    doc["summary"] = {"compared": len(compared), "registers_agree": agree,
                      "shared_agree": sum(r["shared_agree"] for r in compared), "failed_cases": len(doc["errors"]),
                      "cross_errors": sum(1 for r in doc["records"] if (r.get("cross") or {}).get("error"))}
    out.write_text(json.dumps(doc, indent=2, default=str))
    print(f"# registers agree on {agree} of {len(compared)} kernels; {len(doc['errors'])} case(s) failed; "
          f"JSON: {out}")
    return 1 if doc["errors"] or agree < len(compared) else 0


if __name__ == "__main__":
    sys.exit(main())

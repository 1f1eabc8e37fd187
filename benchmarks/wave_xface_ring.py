"""Would the x faces gain from the cp.async ring? (docs/wave.md, "A design for the next step".) On the default CPML
step's geometry (512**3 model + a ``--width``-point CPML, fp32 order 8) this times, one launch at a time on one
stream, the x faces' own layer launch (``wave_layer_kernel``, the step's ``layers:2``, psi_x inside) against the
*plain* step (p_next = 2 p - p_prev + m lap p, no CPML terms) on the same boxes, by the ring
(``wave_smem_kernel``, several tiles) and by the register window (``wave_zwin_kernel``). The plain step moves 16 B a
point; the x faces' launch about 32 (psi_x and zeta read and written besides). If the ring's plain step on these
thin boxes is not far below the x faces' time, the design's estimate (0.10 ms against 0.185) does not hold.

Every plain variant is checked against the float64 torch step on its boxes first; the x-face launch is the step's
own (checked by the CPML suites). Median of ``time_rotating`` (no input rotation: the boxes' 200 MB exceed the L2).

    PYTHONPATH=src python benchmarks/wave_xface_ring.py --out DIR [--width 12]
"""
from __future__ import annotations

import argparse
import itertools
import sys
from dataclasses import asdict, replace
from pathlib import Path

import torch
import triton
import triton.language as tl

from tilecraft.bench.harness import Record, time_rotating, write_results
from tilecraft.bench.wave import _copy_axes, parts_state
from tilecraft.ops import wave as ops
from tilecraft.reference.wave import wave_step_torch


@triton.jit
def _box_stream_kernel(a_ptr, b_ptr, c_ptr, d_ptr, e_ptr, o_ptr, f_ptr, g_ptr, z0, z1, y0, y1, x0, x1, s_z, s_y,
                       NIN: tl.constexpr, NOUT: tl.constexpr, BY: tl.constexpr, BX: tl.constexpr, BZ: tl.constexpr):
    """The least a kernel on these boxes must do: (BY, BX) tiles marching BZ planes, NIN arrays read and NOUT
    written at every point of the box, no halo, no arithmetic but a sum (so no load is dead)."""
    pid = tl.program_id(0)
    n_x = tl.cdiv(x1 - x0, BX)
    n_y = tl.cdiv(y1 - y0, BY)
    tx = pid % n_x
    ty = (pid // n_x) % n_y
    tz = pid // (n_x * n_y)
    ys = y0 + ty * BY + tl.arange(0, BY)
    xs = x0 + tx * BX + tl.arange(0, BX)
    xs = tl.max_contiguous(tl.multiple_of(xs, 4), 4)
    mask = (ys < y1)[:, None] & (xs < x1)[None, :]
    offs = ys[:, None] * s_y + xs[None, :]
    for z in range(z0 + tz * BZ, tl.minimum(z0 + tz * BZ + BZ, z1)):
        o = z * s_z.to(tl.int64) + offs
        acc = tl.load(a_ptr + o, mask=mask, other=0.0)
        if NIN > 1:
            acc += tl.load(b_ptr + o, mask=mask, other=0.0)
        if NIN > 2:
            acc += tl.load(c_ptr + o, mask=mask, other=0.0)
        if NIN > 3:
            acc += tl.load(d_ptr + o, mask=mask, other=0.0)
        if NIN > 4:
            acc += tl.load(e_ptr + o, mask=mask, other=0.0)
        tl.store(o_ptr + o, acc, mask=mask)
        if NOUT > 1:
            tl.store(f_ptr + o, acc, mask=mask)
        if NOUT > 2:
            tl.store(g_ptr + o, acc, mask=mask)


@triton.jit
def _pair_stream_kernel(a_ptr, b_ptr, c_ptr, o_ptr, z0, z1, y0, y1, xa0, xa1, xb0, xb1, s_z, s_y,
                        BY: tl.constexpr, BX: tl.constexpr, BZ: tl.constexpr, ORDER: tl.constexpr):
    """``_box_stream_kernel`` (3 read, 1 written) over two boxes with the same z and y range and one x tile each,
    ORDER 0: box a's programs then box b's (as the layer launches' tables run them); 1: the two boxes' tiles of the
    same rows and planes next to each other in the launch (program 2 i in box a, 2 i + 1 in box b), so that the right
    face's row y and the left face's row y + 1, neighbours in memory, are read at about the same time."""
    pid = tl.program_id(0)
    n_y = tl.cdiv(y1 - y0, BY)
    n_z = tl.cdiv(z1 - z0, BZ)
    if ORDER == 0:
        box = pid // (n_y * n_z)
        t = pid % (n_y * n_z)
    else:
        box = pid % 2
        t = pid // 2
    x0 = tl.where(box == 0, xa0, xb0)
    x1 = tl.where(box == 0, xa1, xb1)
    ty = t % n_y
    tz = t // n_y
    ys = y0 + ty * BY + tl.arange(0, BY)
    xs = x0 + tl.arange(0, BX)
    xs = tl.max_contiguous(tl.multiple_of(xs, 4), 4)
    mask = (ys < y1)[:, None] & (xs < x1)[None, :]
    offs = ys[:, None] * s_y + xs[None, :]
    for z in range(z0 + tz * BZ, tl.minimum(z0 + tz * BZ + BZ, z1)):
        o = z * s_z.to(tl.int64) + offs
        acc = tl.load(a_ptr + o, mask=mask, other=0.0) + tl.load(b_ptr + o, mask=mask, other=0.0) \
            + tl.load(c_ptr + o, mask=mask, other=0.0)
        tl.store(o_ptr + o, acc, mask=mask)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    ap.add_argument("--width", type=int, default=12)
    args = ap.parse_args()
    st = parts_state(width=args.width)
    p, pp, m = st.p, st.pp, st.m
    order, lo, hi, sp = 8, tuple(st.lo), tuple(st.hi), st.spacing
    axes = _copy_axes(st.axes0)
    kaxes = {ax.axis: ax for ax in axes}
    cfg = replace(ops.default_cpml_config(p.device), streams=False)
    _i, _s, plan = ops.layer_plan(lo, hi, kaxes, 3, p.shape[2], cfg, 4, p.stride()[:2])
    (tile, table), = [(tile, table) for a, tile, table, _n in plan if tuple(a) == (2,)]
    boxes = [((r[0], r[2], r[4]), (r[1], r[3], r[5])) for r in table]
    points = sum((b[0] - a[0]) * (b[1] - a[1]) * (b[2] - a[2]) for a, b in boxes)
    print(f"x faces: tile {tile}, boxes {boxes}, {points / 1e6:.2f} M points", flush=True)
    out = torch.empty_like(p)
    records = []

    def timed(name: str, fn, bytes_pt: int, extra: dict, n_points: int | None = None, budget_s: float = 1.0) -> None:
        """Median time of ``fn()`` over ``n_points`` points (the x faces' by default) moving ``bytes_pt`` bytes each."""
        n_points = points if n_points is None else n_points
        t = time_rotating(lambda _i: fn(), 1, budget_s=budget_s, max_runs=200)
        ms = t.median_ms
        tbps = n_points * bytes_pt / (ms * 1e-3) / 1e12
        print(f"  {name:34s} {ms:.4f} ms  {tbps / st.copy:6.1%} of copy at {bytes_pt} B/pt"
              f"{'' if n_points == points else f', {n_points / 1e6:.1f} M points'}", flush=True)
        records.append(Record(suite="wave", case={"variant": name, "width": args.width, **extra},
                              metric="time", unit="ms", ours=ms, ceiling="copy bandwidth (measured, same run)",
                              ceiling_value=st.copy, measured=True,
                              extra={"points": n_points, "bytes_per_point": bytes_pt, "tbps": tbps}))

    # the boxes' own ceiling: torch's strided copy of p's boxes (read 4 B, write 4 B a point), and of p and p_prev
    # into two outputs (16 B a point, as the plain step moves)
    out2 = torch.empty_like(p)
    views = [tuple(t[a[0]:b[0], a[1]:b[1], a[2]:b[2]] for t in (p, pp, out, out2)) for a, b in boxes]

    def copy1():
        for v in views:
            v[2].copy_(v[0])

    def copy2():
        for v in views:
            v[2].copy_(v[0])
            v[3].copy_(v[1])

    timed("torch copy of the boxes", copy1, 8, {"kernel": "copy"})
    timed("torch copy of the boxes, twice", copy2, 16, {"kernel": "copy"})
    # the same with a Triton kernel of 128-bit accesses: the boxes' floor at 16 B (p, p_prev, m read, out
    # written) and 32 B a point (p, p_prev, m, psi, zeta read; out, psi, zeta written)
    extra_in = [torch.empty_like(p) for _ in range(3)]
    for nin, nout in ((3, 1), (5, 3)):
        for by, bx, bz, w in ((8, 32, 4, 2), (8, 32, 16, 2), (16, 32, 16, 4), (32, 32, 16, 8)):
            def stream(nin=nin, nout=nout, by=by, bx=bx, bz=bz, w=w):
                for a, b in boxes:
                    n = triton.cdiv(b[2] - a[2], bx) * triton.cdiv(b[1] - a[1], by) * triton.cdiv(b[0] - a[0], bz)
                    _box_stream_kernel[(n,)](p, pp, m, extra_in[0], extra_in[1], out, out2, extra_in[2],
                                             a[0], b[0], a[1], b[1], a[2], b[2], p.stride(0), p.stride(1),
                                             NIN=nin, NOUT=nout, BY=by, BX=bx, BZ=bz, num_warps=w)
            timed(f"stream {nin} in {nout} out {by}x{bx} z{bz} w{w}", stream, 4 * (nin + nout), {"kernel": "stream"})
    # the same stream on the ring interior's box (rows of 488 columns): the kernel's rate where rows are long
    (ilo0, ihi0, _x0), = ops._march_plan(p, order, lo, hi, kaxes, 3, cfg,
                                         ops.cpml_interior_config(p.dtype, order, p.device, lo, hi))[0][:1]
    n_in = (ihi0[0] - ilo0[0]) * (ihi0[1] - ilo0[1]) * (ihi0[2] - ilo0[2])
    for by, bx, bz, w in ((8, 32, 4, 2), (8, 128, 16, 4)):
        def stream_in(by=by, bx=bx, bz=bz, w=w):
            n = triton.cdiv(ihi0[2] - ilo0[2], bx) * triton.cdiv(ihi0[1] - ilo0[1], by) * triton.cdiv(ihi0[0] - ilo0[0], bz)
            _box_stream_kernel[(n,)](p, pp, m, p, p, out, out, out, ilo0[0], ihi0[0], ilo0[1], ihi0[1], ilo0[2],
                                     ihi0[2], p.stride(0), p.stride(1), NIN=3, NOUT=1, BY=by, BX=bx, BZ=bz,
                                     num_warps=w)
        timed(f"stream interior {by}x{bx} z{bz} w{w}", stream_in, 16, {"kernel": "stream"}, n_in)
    # The interior's stream and the x faces' stream at the same time on two CUDA streams, against one after the
    # other: whether the thin boxes' low rate is the DRAM's (it then adds up) or their own parallelism's (hidden
    # beside a long-row stream)
    side = torch.cuda.Stream()

    def launch_stream(a, b, by, bx, bz, w):
        n = triton.cdiv(b[2] - a[2], bx) * triton.cdiv(b[1] - a[1], by) * triton.cdiv(b[0] - a[0], bz)
        _box_stream_kernel[(n,)](p, pp, m, p, p, out, out, out, a[0], b[0], a[1], b[1], a[2], b[2], p.stride(0),
                                 p.stride(1), NIN=3, NOUT=1, BY=by, BX=bx, BZ=bz, num_warps=w)

    def interior_stream():
        launch_stream(ilo0, ihi0, 8, 128, 16, 4)

    def faces_stream():
        for a, b in boxes:
            launch_stream(a, b, 8, 32, 4, 2)

    def both_serial():
        interior_stream()
        faces_stream()

    def both_concurrent():
        main = torch.cuda.current_stream()
        side.wait_stream(main)
        with torch.cuda.stream(side):
            faces_stream()
        interior_stream()
        main.wait_stream(side)

    # the stream over whole rows: the interior's box widened over the x faces (x [4, 540)), one launch
    wide0 = ((ilo0[0], ilo0[1], min(a[2] for a, _b in boxes)), (ihi0[0], ihi0[1], max(b[2] for _a, b in boxes)))

    def wide_stream():
        launch_stream(wide0[0], wide0[1], 8, 128, 16, 4)

    def wide_stream32():
        launch_stream(wide0[0], wide0[1], 8, 32, 4, 2)

    for name, fn in (("streams: interior then x faces", both_serial),
                     ("streams: the widened box, 8x128 tiles", wide_stream),
                     ("streams: the widened box, 8x32 tiles", wide_stream32),
                     ("streams: interior beside x faces (2 CUDA streams)", both_concurrent)):
        timed(name, fn, 16, {"kernel": "stream"}, n_in + points)
    # the two faces' programs one box after the other, or interleaved (the right face's rows next to the left's
    # in memory): one launch each way
    if len(boxes) == 2 and all(b[2] - a[2] <= 32 for a, b in boxes) and boxes[0][0][:2] == boxes[1][0][:2] \
            and boxes[0][1][:2] == boxes[1][1][:2]:
        (a0, b0), (a1, b1) = boxes
        for order_ in (0, 1):
            for by, bz, w in ((8, 4, 2), (8, 16, 2), (16, 4, 4)):
                def pair(order_=order_, by=by, bz=bz, w=w):
                    n = 2 * triton.cdiv(b0[1] - a0[1], by) * triton.cdiv(b0[0] - a0[0], bz)
                    _pair_stream_kernel[(n,)](p, pp, m, out, a0[0], b0[0], a0[1], b0[1], a0[2], b0[2], a1[2], b1[2],
                                              p.stride(0), p.stride(1), BY=by, BX=32, BZ=bz, ORDER=order_,
                                              num_warps=w)
                timed(f"pair stream {'interleaved' if order_ else 'box by box'} {by}x32 z{bz} w{w}", pair, 16,
                      {"kernel": "stream"})
    timed("x faces (layers:2, default)", lambda: ops._march_layers(
        p, pp, m, out, order, sp, lo, hi, axes, kaxes, None, cfg, parts=("layers:2",)), 32, {"kernel": "layer"})

    # the float64 plain step on the boxes, to check each plain variant
    p64, pp64, m64 = p.double(), pp.double(), m.double()
    ref = torch.zeros_like(p64)
    for a, b in boxes:
        wave_step_torch(p64, pp64, m64, ref, order, sp, a, b)
    del p64, pp64, m64
    variants = [("ring", ops.WaveConfig(by, bx, bz, w, kernel="smem", ahead=ah, slack=sl))
                for by, bx, w in ((32, 32, 8), (16, 32, 4), (8, 32, 2), (32, 16, 4))
                for bz, ah, sl in ((64, 2, 0), (128, 2, 0), (64, 3, 2))]
    variants += [("zwin", replace(ops.zwin_config(), block_y=by, block_x=bx, num_warps=w))
                 for by, bx, w in ((32, 32, 8), (16, 32, 4), (8, 32, 2))]
    for kind, vc in variants:
        whys = {ops.smem_step_ok(p, order, a, b, None, vc) if kind == "ring" else
                ops.zwin_step_ok(p, order, a, b, None, vc) for a, b in boxes} - {None}
        name = f"plain {kind} {vc.block_y}x{vc.block_x} w{vc.num_warps} z{vc.block_z}" + (
            f" a{vc.ahead} s{vc.slack}" if kind == "ring" else "")
        if whys:
            print(f"  {name}: not taken ({whys.pop()})", flush=True)
            continue

        def run(vc=vc):
            for a, b in boxes:
                ops._launch_step(p, pp, m, out, order, sp, a, b, None, vc, a[2] - a[2] % 4)

        try:
            out.fill_(float("nan"))
            run()
            torch.cuda.synchronize()
        except Exception as e:  # a tile the kernel refuses at compile or launch: say so, go on
            print(f"  {name}: failed ({type(e).__name__}: {str(e)[:200]})", flush=True)
            continue
        err = max(float((out[a[0]:b[0], a[1]:b[1], a[2]:b[2]].double()
                         - ref[a[0]:b[0], a[1]:b[1], a[2]:b[2]]).abs().max()) for a, b in boxes)
        scale = float(ref.abs().max())
        if not err <= 1e-5 * scale:
            print(f"  {name}: WRONG (max error {err:.3g} against {scale:.3g})", flush=True)
            continue
        timed(name, run, 16, {"kernel": kind, "config": asdict(vc),
                              "max_error": err})
    # The ring interior of the step, and the same widened in x over the x faces' boxes: what the x faces' plain
    # part would cost inside the ring (long rows), against their own launch above
    icfg = ops.cpml_interior_config(p.dtype, order, p.device, lo, hi)
    interiors = ops._march_plan(p, order, lo, hi, kaxes, 3, cfg, icfg)[0]
    if len(interiors) != 1:
        print(f"  interior boxes {interiors}: not one box, not timed", flush=True)
        interiors = []
    (ilo, ihi, _x), = interiors or [((0,) * 3, (0,) * 3, 0)]
    wide = ((ilo[0], ilo[1], min(a[2] for a, _b in boxes)), (ihi[0], ihi[1], max(b[2] for _a, b in boxes)))
    for (name, (a, b)), bz in itertools.product((("ring interior", (ilo, ihi)),
                                                  ("ring interior widened over the x faces", wide)),
                                                 (icfg.block_z, 64, 128, 168)):
        # 256 planes (the step's) leave a third wave of programs on the widened box: other marches too
        icfg = replace(icfg, block_z=bz)
        name = f"{name} z{bz}"
        n_pts = (b[0] - a[0]) * (b[1] - a[1]) * (b[2] - a[2])
        why = ops.smem_step_ok(p, order, a, b, None, icfg)
        if why:
            print(f"  {name} {a} {b}: not taken ({why})", flush=True)
            continue
        out.fill_(float("nan"))
        ops._launch_step(p, pp, m, out, order, sp, a, b, None, icfg)
        sub = tuple(slice(x - order // 2, y + order // 2) for x, y in zip(a, b))
        got = out[tuple(slice(x, y) for x, y in zip(a, b))].double()
        want = torch.zeros_like(p[sub], dtype=torch.float64)
        wave_step_torch(p[sub].double(), pp[sub].double(), m[sub].double(), want, order, sp, (order // 2,) * 3,
                        tuple(y - x + order // 2 for x, y in zip(a, b)))
        err = float((got - want[(slice(order // 2, -(order // 2)),) * 3]).abs().max())
        if not err <= 1e-5 * float(want.abs().max()):
            print(f"  {name}: WRONG (max error {err:.3g})", flush=True)
            continue
        del got, want
        timed(f"{name} {a} {b}", lambda a=a, b=b, c=icfg: ops._launch_step(p, pp, m, out, order, sp, a, b, None, c),
              16, {"kernel": "ring", "lo": list(a), "hi": list(b)}, n_pts, budget_s=2.0)
    args.out.mkdir(parents=True, exist_ok=True)
    write_results(records, "wave.xface_ring", args.out / f"wave-xface-ring-w{args.width}.json", st.info)
    return 0


if __name__ == "__main__":
    sys.exit(main())

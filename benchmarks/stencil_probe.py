"""Diagnostics: how fast do the stencil kernels' access patterns move data when there is no stencil?

Times copies of a (nz, ny, nx) grid in the z-march pattern (one program walks BLOCK_Z planes of a
(BLOCK_Y, BLOCK_X) tile) and in the plane pattern (one program, one tile), against cudaMemcpy.
    PYTHONPATH=src python benchmarks/stencil_probe.py
"""
from __future__ import annotations

import itertools

import torch
import triton
import triton.language as tl

from tilecraft.bench.harness import time_rotating
from tilecraft.hardware.ceilings import measure_copy_bandwidth


@triton.jit
def march_copy(u, o, nz, ny, nx, BY: tl.constexpr, BX: tl.constexpr, BZ: tl.constexpr):
    n_tx = tl.cdiv(nx, BX)
    n_ty = tl.cdiv(ny, BY)
    pid = tl.program_id(0)
    tx = pid % n_tx
    ty = (pid // n_tx) % n_ty
    zc = pid // (n_tx * n_ty)
    ys = ty * BY + tl.arange(0, BY)
    xs = tx * BX + tl.arange(0, BX)
    offs = ys[:, None] * nx + xs[None, :]
    m = (ys < ny)[:, None] & (xs < nx)[None, :]
    plane = (ny * nx).to(tl.int64)
    z0 = zc * BZ
    nxt = tl.load(u + z0 * plane + offs, mask=m)
    for z in range(z0, tl.minimum(z0 + BZ, nz)):
        cur = nxt
        nxt = tl.load(u + (z + 1) * plane + offs, mask=m & (z + 1 < nz))
        tl.store(o + z * plane + offs, cur, mask=m, cache_modifier=".cs")


@triton.jit
def plane_copy(u, o, nz, ny, nx, BY: tl.constexpr, BX: tl.constexpr):
    tx = tl.program_id(0)
    ty = tl.program_id(1)
    z = tl.program_id(2).to(tl.int64)
    ys = ty * BY + tl.arange(0, BY)
    xs = tx * BX + tl.arange(0, BX)
    offs = z * ny * nx + ys[:, None] * nx + xs[None, :]
    m = (ys < ny)[:, None] & (xs < nx)[None, :]
    tl.store(o + offs, tl.load(u + offs, mask=m), mask=m, cache_modifier=".cs")


@triton.jit
def plane_partial(u, o, nz, ny, nx, BY: tl.constexpr, BX: tl.constexpr, XN: tl.constexpr, YN: tl.constexpr,
                  ZN: tl.constexpr):
    """A one-tile-per-program 'stencil' with only some neighbour directions (x: unaligned shifted
    loads, y: rows above and below, z: the planes above and below), interior z only."""
    tx = tl.program_id(0)
    ty = tl.program_id(1)
    z = tl.program_id(2).to(tl.int64) + 1
    ys = ty * BY + tl.arange(0, BY)
    xs = tx * BX + tl.arange(0, BX)
    plane = (ny * nx).to(tl.int64)
    offs = z * plane + ys[:, None] * nx + xs[None, :]
    m = (ys >= 1)[:, None] & (ys < ny - 1)[:, None] & (xs >= 1)[None, :] & (xs < nx - 1)[None, :]
    mr = (ys >= 1)[:, None] & (ys < ny - 1)[:, None] & (xs < nx)[None, :]
    acc = tl.load(u + offs, mask=mr, other=0.0)
    if XN:
        acc += tl.load(u + offs - 1, mask=m, other=0.0) + tl.load(u + offs + 1, mask=m, other=0.0)
    if YN:
        acc += tl.load(u + offs - nx, mask=mr, other=0.0) + tl.load(u + offs + nx, mask=mr, other=0.0)
    if ZN:
        acc += tl.load(u + offs - plane, mask=mr, other=0.0) + tl.load(u + offs + plane, mask=mr, other=0.0)
    tl.store(o + offs, acc, mask=mr, cache_modifier=".cs")


def main() -> None:
    copy = measure_copy_bandwidth()
    print(f"cudaMemcpy {copy:.3f} TB/s", flush=True)
    nz = ny = nx = 512
    us = [torch.rand(nz, ny, nx, dtype=torch.float64, device="cuda") for _ in range(2)]
    out = torch.empty_like(us[0])
    nbytes = 2 * us[0].numel() * 8
    for by, bx, bz, nw in itertools.product((2, 8), (128, 512), (4, 32), (4, 8)):
        grid = (triton.cdiv(nx, bx) * triton.cdiv(ny, by) * triton.cdiv(nz, bz),)
        t = time_rotating(lambda i: march_copy[grid](us[i], out, nz, ny, nx, BY=by, BX=bx, BZ=bz, num_warps=nw), 2,
                          budget_s=0.3)
        assert torch.equal(out, us[(t.runs + 2) % 2]) or True
        print(f"march by={by} bx={bx} bz={bz} w={nw}: {nbytes / t.median_ms / 1e9 / copy:6.1%}", flush=True)
    for by, bx, nw in itertools.product((1, 4, 8), (128, 512), (4, 8)):
        grid = (triton.cdiv(nx, bx), triton.cdiv(ny, by), nz)
        t = time_rotating(lambda i: plane_copy[grid](us[i], out, nz, ny, nx, BY=by, BX=bx, num_warps=nw), 2,
                          budget_s=0.3)
        print(f"plane by={by} bx={bx} w={nw}: {nbytes / t.median_ms / 1e9 / copy:6.1%}", flush=True)
    march_copy[(triton.cdiv(nx, 128) * triton.cdiv(ny, 2) * triton.cdiv(nz, 32),)](us[0], out, nz, ny, nx, BY=2, BX=128,
                                                                                  BZ=32)
    print("march copy exact:", torch.equal(out, us[0]))
    # which neighbour direction costs: the same one-tile-per-program kernel with x, y, z terms on/off
    for (by, bx, nw), (xn, yn, zn) in itertools.product(((8, 128, 4), (4, 512, 8), (1, 512, 4)),
                                                         itertools.product((0, 1), repeat=3)):
        grid = (triton.cdiv(nx, bx), triton.cdiv(ny, by), nz - 2)
        t = time_rotating(lambda i: plane_partial[grid](us[i], out, nz, ny, nx, BY=by, BX=bx, XN=xn, YN=yn, ZN=zn,
                                                        num_warps=nw), 2, budget_s=0.3)
        print(f"partial by={by} bx={bx} w={nw} x={xn} y={yn} z={zn}: {nbytes / t.median_ms / 1e9 / copy:6.1%}",
              flush=True)


if __name__ == "__main__":
    main()

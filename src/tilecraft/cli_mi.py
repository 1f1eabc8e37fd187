"""``tilecraft mi``: the matrix-instruction calculator (AMD MFMA, NVIDIA mma.sync/wgmma, Intel DPAS).

    tilecraft mi list <arch>
    tilecraft mi show <arch> <instruction> [--json]
    tilecraft mi layout <arch> <instruction> --operand A|B|C|D|K [--format text|markdown|csv|json] [modifiers]
    tilecraft mi where <arch> <instruction> --operand A --row I --col J [--block B] [modifiers]
    tilecraft mi which <arch> <instruction> --operand D --register R --lane L [modifiers]
    tilecraft mi peaks [device] [--json]

Modifiers: --cbsz --abid --blgp (CDNA), --opsel --neg (RDNA); K is the index operand of a sparse
instruction (SMFMAC/SWMMAC). RDNA wave64: append _w64 to the instruction name.

Argument handling and formatting only; the calculator is ``tilecraft.analysis.matrix_instructions``.
Every error is one line on stderr with exit code 2.
"""
from __future__ import annotations

import csv
import io
import json
from enum import Enum
from typing import Annotated

import typer

from tilecraft._cli import fail as _err
from tilecraft.analysis import matrix_instructions as mi
from tilecraft.hardware import peaks as hw_peaks

mi_app = typer.Typer(no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
                     help="Matrix instructions: shapes, rates and which lane/register holds which element.")

HELP = "Matrix-instruction calculator: AMD MFMA/WMMA, NVIDIA mma.sync/wgmma, Intel DPAS."


class Fmt(str, Enum):
    text = "text"
    markdown = "markdown"
    csv = "csv"
    json = "json"


class Operand(str, Enum):
    A = "A"
    B = "B"
    C = "C"
    D = "D"
    K = "K"




def _run(fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except ValueError as exc:
        _err(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)


Cbsz = Annotated[int, typer.Option("--cbsz", help="AMD: broadcast one A block to 2**cbsz neighbours.")]
Abid = Annotated[int, typer.Option("--abid", help="AMD: which block of each cbsz group broadcasts.")]
Blgp = Annotated[int, typer.Option("--blgp", help="AMD: B lane-group pattern 0..7 (CDNA3 fp64: negate bits).")]
Opsel = Annotated[int, typer.Option("--opsel", help="RDNA3: 4 puts 16-bit C/D in bits [31:16]; RDNA4 SWMMAC: index set.")]
Neg = Annotated[int, typer.Option("--neg", help="RDNA: negate bits (1 A, 2 B, 4 C); integer: A/B signed.")]
OperandOpt = Annotated[Operand, typer.Option("--operand", "-o", case_sensitive=False,
                                            help="A, B, C, D, or K (sparse index).")]


def _signed_name(name: str, value: str | None) -> str:
    """The element as ``mi layout`` marks it: negated (``-A[i][k]``) or read as signed (``A[i][k] (signed)``)."""
    if value == "negated":
        return "-" + name
    return f"{name} (signed)" if value == "signed" else name


@mi_app.command("list")
def list_cmd(arch: Annotated[str, typer.Argument(help="Architecture or alias (gfx90a, mi300x, sm_90, pvc ...).")],
             as_json: Annotated[bool, typer.Option("--json", help="JSON records.")] = False) -> None:
    """List the instructions of an architecture."""
    ins = _run(mi.list_instructions, arch)
    if as_json:
        typer.echo(json.dumps([i.as_dict() for i in ins], indent=1))
        return
    a = ins[0].arch if ins else arch
    typer.echo(f"{a}: {len(ins)} instructions")
    w = max(len(i.name) for i in ins)
    typer.echo(f"{'instruction':<{w}}  {'MxNxK':>10} {'blocks':>6} {'cycles':>6} {'FLOPs':>7} "
               f"{'FLOPs/unit/clk':>14}  layout")
    for i in ins:
        rate = i.flops_per_unit_per_clock
        typer.echo(f"{i.name:<{w}}  {f'{i.m}x{i.n}x{i.k}':>10} {i.blocks:>6} {i.cycles if i.cycles else '-':>6} "
                   f"{i.flops:>7} {rate if rate is not None else '-':>14}  "
                   f"{'computed' if mi.layout_supported(i) else 'not yet'}")


@mi_app.command("show")
def show_cmd(arch: str, instruction: str,
             as_json: Annotated[bool, typer.Option("--json", help="JSON record.")] = False) -> None:
    """Detail one instruction: shape, blocks, cycles, FLOPs, registers, modifiers, co-execution."""
    ins = _run(mi.instruction, arch, instruction)
    d = ins.as_dict()
    if as_json:
        typer.echo(json.dumps(d, indent=1))
        return
    rate = d["flops_per_unit_per_clock"]
    lines = [
        f"{ins.name} ({ins.arch}, {ins.family})",
        f"  shape         {ins.m}x{ins.n}x{ins.k}, blocks {ins.blocks}",
        f"  types         A {ins.in_type}, B {ins.in_type_b}, C/D {ins.out_type}",
        f"  lanes         {ins.lanes}",
        f"  cycles        {ins.cycles if ins.cycles else 'n/a'}",
        f"  FLOPs         {ins.flops}",
        f"  {'FLOPs/' + d['unit'] + '/clk':<13} {rate if rate is not None else 'n/a'}",
        "  registers     " + ", ".join(f"{k} {v}" for k, v in d["registers"].items()),
        f"  modifiers     {', '.join(ins.modifiers) or 'none'}",
        f"  co-execution  {'n/a' if ins.coexec is None else ('yes' if ins.coexec else 'no')}"
        + (f" (delay {ins.coexec_delay})" if ins.coexec_delay is not None else ""),
        f"  layout        {'computed from formulas' if d['layout_computed'] else 'not computed yet'}",
    ]
    lines += [f"  note          {n}" for n in ins.notes]
    typer.echo("\n".join(lines))


@mi_app.command("layout")
def layout_cmd(arch: str, instruction: str, operand: OperandOpt,
               fmt: Annotated[Fmt, typer.Option("--format", "-f", help="text, markdown, csv or json.")] = Fmt.text,
               cbsz: Cbsz = 0, abid: Abid = 0, blgp: Blgp = 0, opsel: Opsel = 0, neg: Neg = 0) -> None:
    """Whole-operand layout: one record per element (json: one JSON object per line)."""
    recs = _run(mi.layout_table, arch, instruction, operand.value, cbsz=cbsz, abid=abid, blgp=blgp,
                opsel=opsel, neg=neg)
    ins = mi.instruction(arch, instruction)
    if fmt is Fmt.json:
        for r in recs:
            typer.echo(json.dumps(r))
        return
    cols = ["element", "row", "column", "block", "register", "lanes", "bits", "location"]
    if any(r["value"] for r in recs):
        cols.append("value")

    def cell(r, c):
        v = r[c]
        if c == "element":
            return _signed_name(v, r["value"])
        if c == "lanes":
            return " ".join(map(str, v))
        if c == "bits":
            return f"[{v[0]}:{v[1]}]"
        return str(v)

    if fmt is Fmt.csv:
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(cols)
        for r in recs:
            w.writerow([cell(r, c) for c in cols])
        typer.echo(buf.getvalue(), nl=False)
        return
    if ins.notes:
        typer.echo("\n".join(f"# {n}" for n in ins.notes))
    rows = [[cell(r, c) for c in cols] for r in recs]
    if fmt is Fmt.markdown:
        typer.echo("| " + " | ".join(cols) + " |")
        typer.echo("| " + " | ".join("---" for _ in cols) + " |")
        for row in rows:
            typer.echo("| " + " | ".join(row) + " |")
        return
    widths = [max(len(c), *(len(row[k]) for row in rows)) for k, c in enumerate(cols)]
    typer.echo("  ".join(c.ljust(w) for c, w in zip(cols, widths)).rstrip())
    for row in rows:
        typer.echo("  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip())


@mi_app.command("where")
def where_cmd(arch: str, instruction: str, operand: OperandOpt,
              row: Annotated[int, typer.Option("--row", help="Row of the operand (for B: k).")],
              col: Annotated[int | None, typer.Option("--col", help="Column of the operand (for A: k).")] = None,
              k: Annotated[int | None, typer.Option("--k", help="K only: uncompressed column (AMD's K[i][k]).")] = None,
              block: Annotated[int, typer.Option("--block", help="Block (AMD multi-block).")] = 0,
              cbsz: Cbsz = 0, abid: Abid = 0, blgp: Blgp = 0, opsel: Opsel = 0, neg: Neg = 0) -> None:
    """Element -> (register, lane, bits). For K (sparse index) --col is the stored (compressed)
    column; --k takes AMD's calculator form K[i][k] with k uncompressed (the chunk's 4 bits)."""
    if k is not None:
        if operand is not Operand.K or col is not None:
            _err("--k is for the index operand K only, instead of --col")
        loc = _run(mi.index_bits_for_column, arch, instruction, row, k, cbsz=cbsz, abid=abid, opsel=opsel)
        typer.echo(f"K[{row}][{k}] = {mi.amd_notation(*loc)}  (register {loc.register}, lane {loc.lane}, "
                   f"bits [{loc.bits[0]}:{loc.bits[1]}]: both indices of chunk {k // 4})")
        return
    if col is None:
        _err("give --col (or, for the index operand K, --k)")
    locs = _run(mi.element_to_location, arch, instruction, operand.value, row, col, block,
                cbsz=cbsz, abid=abid, blgp=blgp, opsel=opsel, neg=neg)
    ins = mi.instruction(arch, instruction)
    value = mi.value_modifier(ins, operand.value, mi.Modifiers(cbsz, abid, blgp, opsel, neg))
    name = _signed_name(mi.element_name(ins, operand.value, mi.Element(row, col, block)), value)
    for l in locs:
        typer.echo(f"{name} = {mi._notation(ins, operand.value, l)}  "
                   f"(register {l.register}, lane {l.lane}, bits [{l.bits[0]}:{l.bits[1]}])")


@mi_app.command("which")
def which_cmd(arch: str, instruction: str, operand: OperandOpt,
              register: Annotated[int, typer.Option("--register", help="Register index.")],
              lane: Annotated[int, typer.Option("--lane", help="Lane / thread / work-item.")],
              cbsz: Cbsz = 0, abid: Abid = 0, blgp: Blgp = 0, opsel: Opsel = 0, neg: Neg = 0) -> None:
    """(register, lane) -> element(s) held there."""
    hits = _run(mi.location_to_elements, arch, instruction, operand.value, register, lane,
                cbsz=cbsz, abid=abid, blgp=blgp, opsel=opsel, neg=neg)
    ins = mi.instruction(arch, instruction)
    value = mi.value_modifier(ins, operand.value, mi.Modifiers(cbsz, abid, blgp, opsel, neg))
    if not hits:
        typer.echo(f"register {register}, lane {lane}: not read by {ins.name}")
        return
    for el, bits in hits:
        loc = mi.Location(register - (register % 2 if bits[0] - bits[1] == 63 and ins.arch in mi.AMD_ARCHS else 0),
                          lane, bits)
        typer.echo(f"{mi._notation(ins, operand.value, loc)} = "
                   f"{_signed_name(mi.element_name(ins, operand.value, el), value)}")


@mi_app.command("peaks")
def peaks_cmd(device: Annotated[str | None, typer.Argument(help="H100, H200, A100, MI250X, MI300X (default: all).")] = None,
              as_json: Annotated[bool, typer.Option("--json", help="JSON records.")] = False) -> None:
    """Peak rates (rate x units x clock) and memory bandwidth, against the datasheet."""
    rows = _run(hw_peaks.peak_table, device)
    if as_json:
        typer.echo(json.dumps(rows, indent=1))
        return
    typer.echo(f"{'device':<7} {'dtype':<12} {'peak':>9} {'unit':<8} {'datasheet':>9} {'ratio':>6}  formula")
    for r in rows:
        ref = "-" if r["datasheet"] is None else f"{r['datasheet']:g}"
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.3f}"
        typer.echo(f"{r['device']:<7} {r['dtype']:<12} {r['value']:>9.2f} {r['unit']:<8} {ref:>9} {ratio:>6}  "
                   f"{r['formula']}")


def register(app: typer.Typer) -> None:
    """Attach ``mi`` to the main ``tilecraft`` app."""
    app.add_typer(mi_app, name="mi", help=HELP)

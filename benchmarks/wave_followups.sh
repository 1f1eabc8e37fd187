#!/usr/bin/env bash
# The wave CPML defaults of 2026-11-29 (fifteenth session, measured on an H200 only), on another card (meant for an
# H100) or again, in one device call of about 5 minutes: the previous default against the new one (x_box_tiles, five
# side streams, the ring interior with 256 planes where cpml_interior_config takes it), at 512^3 and at other sizes,
# then the ring under register budgets that leave room for layer CTAs beside it, and the layer launches under other
# register budgets (neither yet timed anywhere). Every
# case is checked against the float64 torch step before it is timed.
# Usage (device machine, repository root): OUT=<folder> bash benchmarks/wave_followups.sh
set -u
out=${OUT:-/tmp}
export PYTHONPATH=${PYTHONPATH:-src}
timeout 120 python benchmarks/wave_side_streams.py --out "$out" --rounds 2 --interiors > "$out/wave-followups-interiors.log" 2>&1
echo "interiors rc $?"; grep -E "round|copy" "$out/wave-followups-interiors.log"
timeout 150 python benchmarks/wave_side_streams.py --out "$out" --rounds 2 --sizes 384,512,640 > "$out/wave-followups-sizes.log" 2>&1
echo "sizes rc $?"; grep -E "round|copy" "$out/wave-followups-sizes.log"
timeout 100 python benchmarks/wave_side_streams.py --out "$out" --rounds 2 --corun > "$out/wave-followups-corun.log" 2>&1
echo "corun rc $?"; grep -E "round|copy|timeline" "$out/wave-followups-corun.log"
timeout 100 python benchmarks/wave_side_streams.py --out "$out" --rounds 2 --layer-regs > "$out/wave-followups-regs.log" 2>&1
echo "layer regs rc $?"; grep -E "round|copy" "$out/wave-followups-regs.log"

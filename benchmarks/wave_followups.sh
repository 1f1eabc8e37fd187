#!/usr/bin/env bash
# The wave CPML defaults of 2026-11-29 (fifteenth and sixteenth sessions, measured on an H200 only), on another card
# (meant for an H100) or again, in one device call of about 5 minutes: the previous default against the new one
# (x_box_tiles, five side streams, the ring interior with 256 planes where cpml_interior_config takes it), at 512^3 and
# at other sizes, then the z window of the z and y layer launches (layer_zwin, the sixteenth session's default) and
# around it, and the z faces with psi_z's planes in registers too (psi_zwin, the default since the seventeenth session, against without), and the x faces' two boxes interleaved (x_face_pairs, the default since the eighteenth session, against without). The --corun and --layer-regs sets, timed on an H200 on 2026-11-29 (no gain), are left out. Every
# case is checked against the float64 torch step before it is timed.
# Usage (device machine, repository root): OUT=<folder> bash benchmarks/wave_followups.sh
set -u
out=${OUT:-/tmp}
export PYTHONPATH=${PYTHONPATH:-src}
timeout 120 python benchmarks/wave_side_streams.py --out "$out" --rounds 2 --interiors > "$out/wave-followups-interiors.log" 2>&1
echo "interiors rc $?"; grep -E "round|copy" "$out/wave-followups-interiors.log"
timeout 150 python benchmarks/wave_side_streams.py --out "$out" --rounds 2 --sizes 384,512,640 > "$out/wave-followups-sizes.log" 2>&1
echo "sizes rc $?"; grep -E "round|copy" "$out/wave-followups-sizes.log"
timeout 150 python benchmarks/wave_side_streams.py --out "$out" --rounds 2 --zwin-faces > "$out/wave-followups-zwin.log" 2>&1
echo "zwin faces rc $?"; grep -E "round|copy" "$out/wave-followups-zwin.log"
timeout 100 python benchmarks/wave_side_streams.py --out "$out" --rounds 3 --zwin-psi > "$out/wave-followups-zwin-psi.log" 2>&1
echo "zwin psi rc $?"; grep -E "round|copy" "$out/wave-followups-zwin-psi.log"
timeout 100 python benchmarks/wave_side_streams.py --out "$out" --rounds 2 --x-face-pairs > "$out/wave-followups-x-face-pairs.log" 2>&1
echo "x face pairs rc $?"; grep -E "round|copy" "$out/wave-followups-x-face-pairs.log"

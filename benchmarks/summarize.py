"""Markdown tables from the stencil results JSON (what the README's "Measured" section quotes).

    python benchmarks/summarize.py benchmarks/results/2026-11-21-h200
"""
from __future__ import annotations

import json
import sys
from pathlib import Path


def _load(path: Path) -> dict:
    return json.loads(path.read_text())


def ladder_table(docs: list[dict]) -> str:
    lines = ["| case | variant | % of copy | TB/s | GPts/s | × baseline | × torch | regs | spills | commit |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for doc in docs:
        for r in doc["records"]:
            c, x = r["case"], r["extra"]
            case = f"{c['dtype']} o{c['order']} {'×'.join(map(str, c['shape']))}"
            res = (x.get("resources") or [{}])[0]
            peer = x.get("ratio_to_peer")
            lines.append(f"| {case} | {c['variant']} | {100 * r['ratio']:.1f}% | {r['ours']:.3f} | "
                         f"{x.get('gpts', float('nan')):.1f} | {x.get('speedup_vs_baseline', float('nan')):.2f} | "
                         f"{'' if peer is None else f'{peer:.1f}'} | {res.get('registers', '')} | "
                         f"{res.get('spills', '')} | {r['commit'][:7]} |")
    return "\n".join(lines)


def sweep_table(doc: dict) -> str:
    rows: dict[tuple, dict] = {}
    variants: list[str] = []
    for r in doc["records"]:
        c = r["case"]
        key = tuple(c["shape"])
        rows.setdefault(key, {})[c["variant"]] = r["ratio"]
        if c["variant"] not in variants:
            variants.append(c["variant"])
    lines = ["| grid (nz×ny×nx) | " + " | ".join(variants) + " |", "| --- |" + " ---: |" * len(variants)]
    for key, vals in rows.items():
        lines.append(f"| {'×'.join(map(str, key))} | " +
                     " | ".join(f"{100 * vals[v]:.1f}%" if v in vals else "" for v in variants) + " |")
    auto = [vals["auto"] for vals in rows.values() if "auto" in vals]
    if auto:
        lines.append(f"\n`auto`: worst point {100 * min(auto):.1f}%, best {100 * max(auto):.1f}% of copy; "
                     f"worst / best = {min(auto) / max(auto):.2f}")
    return "\n".join(lines)


def main() -> None:
    folder = Path(sys.argv[1] if len(sys.argv) > 1 else "benchmarks/results")
    ladders = [_load(p) for p in sorted(folder.glob("ladder-*.json"))]
    first = (ladders or [_load(p) for p in folder.glob("*.json")])[0]["records"][0]
    print(f"Device {first['device']}, torch {first['torch']}, triton {first['triton']}, {first['date'][:10]}; "
          "each record's commit is in its row; the copy ceiling was measured in each run.\n")
    if ladders:
        print(ladder_table(ladders) + "\n")
    if (folder / "orders.json").exists():
        print(ladder_table([_load(folder / "orders.json")]) + "\n")
    for p in sorted(folder.glob("sweep-*.json")):
        print(sweep_table(_load(p)) + "\n")


if __name__ == "__main__":
    main()

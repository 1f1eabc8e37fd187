"""The parts the decode rounds' GPU scripts share (``attention_decode_round8.py``, ``..._round9.py``):
phase 1 (GPU tests and per-candidate warm-ups in parallel processes, their logs gathered into one file)
and phase 2 (candidates, the dispatch and SDPA backends timed in alternating rounds, medians)."""
from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

from tilecraft.bench import attention as ba

ROOT = Path(__file__).resolve().parent.parent


def only(name: str, names) -> str:
    """A pytest -k expression selecting candidate ``name``'s tests (not those of names containing it)."""
    return " and ".join([name] + [f"not {o}" for o in names if o != name and name in o])


def pytest_proc(label: str, k: str, test_file: str, logs: Path, env: dict) -> tuple[str, subprocess.Popen]:
    log = open(logs / f"gpu-tests-{label}.log", "w")
    return f"tests {label}", subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", k, str(ROOT / test_file)],
        stdout=log, stderr=subprocess.STDOUT, env=env)


def warm_proc(script: str, out: str, name: str, logs: Path) -> tuple[str, subprocess.Popen]:
    return f"warm {name}", subprocess.Popen([sys.executable, script, out, "--warm", name],
                                            stdout=subprocess.DEVNULL, stderr=open(logs / f"warm-{name}.log", "w"))


def finish_phase1(procs: list, t0: float, limit: float, logs: Path, gathered: Path) -> dict[str, int | None]:
    """Wait for every process until ``limit`` seconds after ``t0`` (then kill it), gather the logs
    into ``gathered`` (one file: few files come back) and print each one's last line; label -> rc."""
    for label, pr in procs:
        try:
            pr.wait(timeout=max(1.0, limit - (time.time() - t0)))
        except subprocess.TimeoutExpired:
            pr.kill()
            print(f"{label}: killed at the phase-1 limit", flush=True)
        print(f"{label}: rc={pr.returncode}", flush=True)
    with open(gathered, "w") as g:
        for f in sorted(logs.iterdir()):
            text = f.read_text().strip()
            g.write(f"===== {f.name}\n{text}\n")
            if f.name.startswith("gpu-tests"):
                print(f"{f.stem}: {text.splitlines()[-1] if text else '(empty)'}", flush=True)
            elif text:
                print(f"{f.stem}: {text.splitlines()[-1][:200]}", flush=True)
    print(f"phase 1 done at {time.time() - t0:.0f}s", flush=True)
    return {label: pr.returncode for label, pr in procs}


def time_rounds(shapes, timed: dict, backends: tuple[str, ...], rounds: int, budget: float, deadline: float,
                t0: float, copy: float, info, doc: dict, save) -> dict[str, dict[str, list[float]]]:
    """Per shape, ``rounds`` rounds over ``timed`` (name -> DecodeConfig, None: the dispatch) in
    alternating order, the SDPA ``backends`` beside the first of each round; every case checked
    against float64 by ``ba.measure`` first. Records into ``doc`` (``save()`` after each); returns
    label -> name -> fractions of ``copy`` (TB/s) per round."""
    from tilecraft.bench.harness import stamp

    table: dict[str, dict[str, list[float]]] = {}
    names = list(timed) + [f"sdpa-{b}" for b in backends]
    for s in shapes:
        nbytes = ba.attention_bytes(s, 2)
        table[s.label] = {n: [] for n in names}
        for rnd in range(rounds):
            order = list(timed.items()) if rnd % 2 == 0 else list(timed.items())[::-1]
            for i, (name, cfg) in enumerate(order):
                if time.time() - t0 > deadline:
                    break
                res = ba.measure(s, torch.bfloat16, "fwd", backends=backends if i == 0 else (), fwd=cfg,
                                 budget_s=budget, l2_bytes=info.l2_bytes)
                recs = stamp(ba.records_for(s, "bf16", "fwd", res, copy, cfg.as_dict() if cfg else {"dispatch": True}),
                             info)
                for r, t in zip(recs, res):
                    r.case["candidate"] = name if t.impl == "tilecraft" else t.impl
                    r.case["round"] = rnd
                    doc["records"].append(r.as_dict())
                for t in res:
                    key = name if t.impl == "tilecraft" else t.impl
                    if t.ok and t.time_ms:
                        table[s.label][key].append(nbytes / (t.time_ms * 1e-3) / 1e12 / copy)
                    elif t.impl == "tilecraft" or not t.ok:
                        print(f"{s.label} {key}: ok={t.ok} err={t.rel_error} {t.message[:160]}", flush=True)
                save()
                torch.cuda.empty_cache()
        print(f"{s.label}: " + " ".join(f"{n} {100 * statistics.median(v):.1f}%" for n, v in table[s.label].items() if v)
              + f" ({time.time() - t0:.0f}s)", flush=True)
    return table


def summarize(table: dict, doc: dict, save, t0: float) -> None:
    """Medians into ``doc["summary"]``, saved; the short table printed last."""
    doc["summary"] = {lab: {n: (statistics.median(v) if v else None) for n, v in row.items()} for lab, row in table.items()}
    save()
    names = list(next(iter(table.values()))) if table else []
    print("\n% of copy (median over rounds)")
    print(f"{'shape':26s}" + "".join(f"{n[:10]:>11s}" for n in names))
    for lab, row in table.items():
        print(f"{lab:26s}" + "".join(f"{100 * statistics.median(v):10.1f}%" if v else f"{'-':>11s}" for v in row.values()))
    print(f"total {time.time() - t0:.0f}s")


def saver(path: Path, doc: dict):
    return lambda: path.write_text(json.dumps(doc, indent=1, default=str))

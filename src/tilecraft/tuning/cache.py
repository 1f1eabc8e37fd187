"""On-disk cache of tuned configurations.

One JSON file per (op, device, software versions) under ``~/.cache/tilecraft/tuning``
(``TILECRAFT_CACHE`` moves the root, as for the ceilings); inside it, one entry per shape key
(the op buckets its shapes, so nearby shapes share an entry). ``TILECRAFT_TUNE=0`` switches tuning
off everywhere: GEMM then runs its heuristics only (issue 3: "a switch for heuristics only"); the stencil's
``auto`` runs its heuristic and entries already cached.
"""
from __future__ import annotations

import json
import os
import threading
from pathlib import Path

_LOCK = threading.Lock()
_MEMORY: dict[Path, dict] = {}


def tuning_enabled() -> bool:
    """False when ``TILECRAFT_TUNE`` is 0/false/off/no (heuristics only)."""
    return os.environ.get("TILECRAFT_TUNE", "1").strip().lower() not in ("0", "false", "off", "no")


def cache_root() -> Path:
    root = os.environ.get("TILECRAFT_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "tilecraft")
    return Path(root) / "tuning"


def cache_file(op: str, device_name: str, versions: dict[str, str]) -> Path:
    """The cache file of ``op`` on this device and software (torch, triton, CUDA/HIP versions)."""
    parts = [op, device_name] + [f"{k}{versions[k]}" for k in ("torch", "triton", "cuda", "hip") if k in versions]
    name = "-".join(parts)
    for ch in " /+:":
        name = name.replace(ch, "_")
    return cache_root() / f"{name}.json"


def load(path: Path) -> dict:
    """All entries of a cache file (an empty dict when missing or unreadable)."""
    with _LOCK:
        if path in _MEMORY:
            return _MEMORY[path]
        try:
            entries = json.loads(path.read_text())
            if not isinstance(entries, dict):
                entries = {}
        except (OSError, ValueError, RecursionError):  # missing, unreadable, not UTF-8, not JSON, absurdly nested
            entries = {}
        _MEMORY[path] = entries
        return entries


def store(path: Path, key: str, value: dict) -> None:
    """Add one entry and rewrite the file atomically (a rename: readers never see half a file)."""
    with _LOCK:
        entries = dict(_MEMORY.get(path) or {})
        try:
            on_disk = json.loads(path.read_text())
            if isinstance(on_disk, dict):
                entries = {**on_disk, **entries}
        except (OSError, ValueError, RecursionError):
            pass
        entries[key] = value
        _MEMORY[path] = entries
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".tmp{os.getpid()}")
            tmp.write_text(json.dumps(entries, indent=1, sort_keys=True))
            tmp.replace(path)
        except OSError:
            pass  # a read-only home: the entry still lives in memory for this process


def clear_memory() -> None:
    """Forget what was read (tests; another process changed the files)."""
    with _LOCK:
        _MEMORY.clear()

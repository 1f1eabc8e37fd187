"""The test tree itself: pytest imports test modules by basename (the test directories are not packages), so two
modules of one name in different directories break collection of the whole run (CI, 2026-12-01)."""
from __future__ import annotations

from collections import Counter
from pathlib import Path


def test_test_module_basenames_are_unique():
    root = Path(__file__).resolve().parent
    names = Counter(p.name for p in root.rglob("test_*.py"))
    assert not [n for n, c in names.items() if c > 1], sorted(n for n, c in names.items() if c > 1)

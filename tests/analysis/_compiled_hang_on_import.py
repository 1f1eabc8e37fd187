"""Test-only hook for tests/analysis/test_compiled.py: importing this module sleeps for a minute,
standing in for a compiler that hangs, so ``cross_compile``'s timeout can be tested."""
import time

time.sleep(60)

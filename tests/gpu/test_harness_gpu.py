"""The harness on a GPU: with ``hide_launch`` the events bracket the device's work, not the host's
path before the launch; without it, an idle GPU waits for the host and that wait is timed."""
from __future__ import annotations

import time

import torch

from tilecraft.bench.harness import time_rotating


def _slow_host_call(x: torch.Tensor, y: torch.Tensor):
    def call(_i: int) -> None:
        time.sleep(0.003)  # 3 ms of host work before the kernel is enqueued
        torch.add(x, 1.0, out=y)  # a few microseconds on the device
    return call


def test_hide_launch_times_the_device_work_only():
    x = torch.rand(1 << 16, device="cuda")
    y = torch.empty_like(x)
    hidden = time_rotating(_slow_host_call(x, y), 1, min_runs=5, max_runs=20, budget_s=0.1)
    shown = time_rotating(_slow_host_call(x, y), 1, min_runs=5, max_runs=20, budget_s=0.1, hide_launch=False)
    assert shown.median_ms >= 2.5, "on an idle GPU the host's 3 ms before the launch are timed"
    assert hidden.median_ms < 1.0, "with the GPU kept busy only the add is timed"
    assert hidden.host_ms is not None and hidden.host_ms >= 2.5, "the host time is kept beside"
    torch.testing.assert_close(y, x + 1.0)

"""tilecraft.hardware.device helpers that need no GPU."""
from __future__ import annotations

import torch


def test_l2_bytes_is_none_off_cuda():
    from tilecraft.hardware.device import l2_bytes

    assert l2_bytes("cpu") is None and l2_bytes(torch.device("meta")) is None

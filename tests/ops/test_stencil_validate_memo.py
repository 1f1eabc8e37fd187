"""``ops.stencil._validated``: ``validate`` remembered for plain eager calls by what it reads besides the addresses
(types, dtypes, devices, shapes, strides, 16-byte alignment, the arguments): the same (order, spacing) as ``validate``
every time, bad calls raise every time, ``out`` overlapping ``u`` is refused on every call (it depends on the
addresses), and anything that is not a plain tensor is validated afresh."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from tilecraft.ops import stencil as st

SHAPE = (5, 6, 8)
N = 5 * 6 * 8


@pytest.mark.parametrize("order,spacing,variant", [(2, 1.0, "auto"), (4, (0.5, 1, 2.0), "baseline"),
                                                   (2, np.float64(0.25), "auto"), (4, [1.0, 1.0, 0.5], "auto")])
def test_same_result_as_validate_every_time(order, spacing, variant):
    u = torch.randn(SHAPE, dtype=torch.float64)
    for out in (None, torch.empty_like(u)):
        want = st.validate(u, order, spacing, out, variant)
        for _ in range(3):
            assert st._validated(u, order, spacing, out, variant) == want


def test_bad_calls_raise_every_time():
    u = torch.randn(SHAPE)
    st._validated(u, 2, 1.0, None, "auto")
    for _ in range(2):
        with pytest.raises(TypeError, match="order must be an int"):
            st._validated(u, 2.0, 1.0, None, "auto")  # 2.0 == 2: the type is part of the key
        with pytest.raises(TypeError, match="order must be an int"):
            st._validated(u, True, 1.0, None, "auto")
        with pytest.raises(ValueError, match="spacing entries must be finite"):
            st._validated(u, 2, -1.0, None, "auto")
        with pytest.raises(ValueError, match="unknown variant"):
            st._validated(u, 2, 1.0, None, "fastest")
        with pytest.raises(ValueError, match="extent"):
            st._validated(u, 12, 1.0, None, "auto")


def test_out_overlapping_u_is_refused_on_every_call():
    """The same shapes, strides and alignment (16 bytes apart), first apart and then overlapping: the remembered
    entry must not let the overlapping call through."""
    buf = torch.randn(2 * N + 2, dtype=torch.float64)
    u, out = buf[:N].view(SHAPE), buf[N:2 * N].view(SHAPE)
    assert st._validated(u, 2, 1.0, out, "auto") == (2, (1.0, 1.0, 1.0))
    for _ in range(2):
        with pytest.raises(ValueError, match="out overlaps u"):
            st._validated(u, 2, 1.0, buf[2:N + 2].view(SHAPE), "auto")
    assert st._validated(buf[N + 2:].view(SHAPE), 2, 1.0, u, "auto") == (2, (1.0, 1.0, 1.0))


def test_subclasses_are_validated_afresh(monkeypatch):
    class Sub(torch.Tensor):
        pass

    calls = []
    real = st.validate
    monkeypatch.setattr(st, "validate", lambda *a: calls.append(1) or real(*a))
    u = torch.randn(SHAPE).as_subclass(Sub)
    st._validated(u, 2, 0.5, None, "auto")
    st._validated(u, 2, 0.5, None, "auto")
    assert len(calls) == 2
    v = torch.randn(SHAPE)
    st._validated(v, 2, 0.5, None, "auto")
    st._validated(v, 2, 0.5, None, "auto")
    assert len(calls) == 3

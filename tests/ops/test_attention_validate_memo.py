"""``ops.attention._validated``: ``validate`` remembered for plain eager calls without packed sequences by what it
reads (types, dtypes, devices, layouts, shapes, strides, the data pointers' 16-byte alignment, the scalar arguments):
the same Problem as ``validate`` every time, bad calls raise every time, and anything that is not a plain tensor is
validated afresh."""
from __future__ import annotations

import pytest
import torch

from tilecraft.ops import attention as oa


def _qkv(h=4, h_kv=2, s_q=5, s_k=7, d=16, dtype=torch.float16):
    return (torch.randn(1, h, s_q, d).to(dtype), torch.randn(1, h_kv, s_k, d).to(dtype),
            torch.randn(1, h_kv, s_k, d).to(dtype))


@pytest.mark.parametrize("causal,scale,layout", [(False, None, "bhsd"), (True, 0.25, "bhsd"), (False, 2, "bshd")])
def test_same_problem_as_validate_every_time(causal, scale, layout):
    q, k, v = _qkv()
    if layout == "bshd":
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
    want = oa.validate(q, k, v, causal=causal, scale=scale, layout=layout)
    for _ in range(3):
        assert oa._validated(q, k, v, causal, scale, layout) == want


def test_bad_calls_raise_every_time_and_facts_matter():
    q, k, v = _qkv()
    oa._validated(q, k, v, True, None, "bhsd")
    for _ in range(2):
        with pytest.raises(TypeError, match="causal must be a bool"):
            oa._validated(q, k, v, 1, None, "bhsd")  # 1 == True: the type is part of the key
        with pytest.raises(ValueError, match="scale must be finite"):
            oa._validated(q, k, v, True, -1.0, "bhsd")
        with pytest.raises(ValueError, match="must divide"):
            oa._validated(torch.randn(1, 3, 5, 16).half(), k, v, True, None, "bhsd")
        with pytest.raises(ValueError, match="unknown layout"):
            oa._validated(q, k, v, True, None, "bshdx")
    assert oa._validated(q, k, v, False, 0.5, "bhsd").scale == 0.5


def test_subclasses_are_validated_afresh(monkeypatch):
    class Sub(torch.Tensor):
        pass

    q, k, v = _qkv()
    calls = []
    real = oa.validate
    monkeypatch.setattr(oa, "validate", lambda *x, **kw: calls.append(1) or real(*x, **kw))
    sq = q.as_subclass(Sub)
    oa._validated(sq, k, v, False, None, "bhsd")
    oa._validated(sq, k, v, False, None, "bhsd")
    assert len(calls) == 2
    oa._validated(q, k, v, False, 0.3, "bhsd")
    oa._validated(q, k, v, False, 0.3, "bhsd")
    assert len(calls) == 3
    shifted = torch.randn(q.numel() + 1).half()[1:].view(q.shape)  # same shape and strides, 2 bytes off 16
    oa._validated(shifted, k, v, False, 0.3, "bhsd")
    assert len(calls) == 4  # the pointer's alignment is part of the key (validate reads the pointer)

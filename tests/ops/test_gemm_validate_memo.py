"""``ops.gemm._validated``: ``validate`` remembered for plain eager calls by what it reads (types, layouts, dtypes,
devices, shapes, strides, scalar arguments): the same Spec as ``validate`` every time, bad calls raise every time,
and anything that is not a plain tensor is validated afresh."""
from __future__ import annotations

import math

import pytest
import torch

from tilecraft.ops import gemm as og


def _args(**kw):
    base = dict(out_dtype=None, alpha=1.0, beta=0.0, c=None, bias=None, activation=None, precision=None,
                scale_a=None, scale_b=None)
    base.update(kw)
    return base


CASES = [
    (torch.randn(7, 5), torch.randn(5, 3), _args()),
    (torch.randn(7, 5), torch.randn(3, 5).t(), _args(precision="tf32")),
    (torch.randn(2, 7, 5).to(torch.bfloat16), torch.randn(5, 3).to(torch.bfloat16),
     _args(bias=torch.randn(3), activation="gelu", out_dtype=torch.float32)),
    (torch.randn(7, 5), torch.randn(5, 3), _args(alpha=-0.0, beta=2.0, c=torch.randn(7, 3))),
    (torch.randn(7, 5), torch.randn(5, 3), _args(alpha=0.0, beta=2.0, c=torch.randn(7, 3))),
    (torch.randint(-5, 5, (7, 16), dtype=torch.int8), torch.randint(-5, 5, (16, 8), dtype=torch.int8),
     _args(out_dtype=torch.bfloat16, scale_a=torch.rand(7, 1), scale_b=torch.rand(1, 8))),
]


@pytest.mark.parametrize("i", range(len(CASES)))
def test_same_spec_as_validate_every_time(i):
    a, b, kw = CASES[i]
    want = og.validate(a, b, **kw)
    for _ in range(3):
        got = og._validated(a, b, *kw.values())
        assert got == want
        if kw["alpha"] == 0:  # the sign of a zero alpha is kept (not merged with -0.0's entry)
            assert math.copysign(1.0, got.alpha) == math.copysign(1.0, kw["alpha"])


def test_bad_calls_raise_every_time_and_facts_matter():
    a, b = torch.randn(7, 5), torch.randn(5, 3)
    og._validated(a, b, *_args().values())
    for _ in range(2):
        with pytest.raises(ValueError, match="inner dimensions"):
            og._validated(a, torch.randn(6, 3), *_args().values())
        with pytest.raises(ValueError, match="bias"):
            og._validated(a, b, *_args(bias=torch.randn(4)).values())
        with pytest.raises(TypeError, match="activation"):
            og._validated(a, b, *_args(activation=["relu"]).values())  # unhashable: validate says why
        with pytest.raises(ValueError, match="out of range"):
            og._validated(a, b, *_args(alpha=1e300).values())
    # a transposed view of the same shape is another layout: another Spec where the layouts differ
    assert og._validated(a, b, *_args().values()) == og.validate(a, b)
    bt = torch.randn(3, 5).t()
    assert og._validated(a, bt, *_args().values()) == og.validate(a, bt)


def test_subclasses_are_validated_afresh(monkeypatch):
    class Sub(torch.Tensor):
        pass

    a, b = torch.randn(7, 5).as_subclass(Sub), torch.randn(5, 3)
    calls = []
    real = og.validate
    monkeypatch.setattr(og, "validate", lambda *x, **k: calls.append(1) or real(*x, **k))
    og._validated(a, b, *_args().values())
    og._validated(a, b, *_args().values())
    assert len(calls) == 2
    p = torch.nn.Parameter(torch.randn(7, 5))
    og._validated(p, b, *_args().values())
    og._validated(p, b, *_args().values())
    assert len(calls) <= 3  # a Parameter is plain: remembered after its first validation

"""Acoustic wave modelling on one GPU and several: ``tilecraft.wave``.

    >>> from tilecraft import wave
    >>> model = wave.Model.layered((101, 201), [1500.0, 2500.0], [500.0], spacing=10.0)
    >>> src = wave.Source([[20.0, 1000.0]], f0=15.0)
    >>> rec = wave.Receivers.line((20.0, 0.0), (20.0, 2000.0), 101)
    >>> result = wave.simulate(model, src, rec, nt=1000, order=8, boundary="pml")
    >>> result.record.shape       # (nt, receivers)

See docs/wave.md.
"""
from tilecraft.ops.wave import wave_step
from tilecraft.wave.boundaries import BOUNDARIES, Layout
from tilecraft.wave.model import Model
from tilecraft.wave.solver import Result, partition, simulate, stable_dt
from tilecraft.wave.source import Receivers, Source, ricker

__all__ = [
           "BOUNDARIES",
           "Layout",
           "Model",
           "Receivers",
           "Result",
           "Source",
           "partition",
           "ricker",
           "simulate",
           "stable_dt",
           "wave_step",
]

"""Benchmark suites and the harness they share."""

# The label of every table and record from a run in Triton's interpreter on the CPU.
INTERPRETER_LABEL = "CPU, Triton interpreter: correctness only, times are not performance figures"

# Rounds in which the stencil ladder and sweep time their variants in turn
# (``tilecraft.bench.stencil.measure_rounds``); each figure is the median of its rounds.
DEFAULT_ROUNDS = 3

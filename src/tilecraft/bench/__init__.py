"""Benchmark suites and the harness they share."""

# The label of every table and record from a run in Triton's interpreter on the CPU.
INTERPRETER_LABEL = "CPU, Triton interpreter: correctness only, times are not performance figures"

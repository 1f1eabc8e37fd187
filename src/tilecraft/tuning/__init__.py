"""Config spaces, pruning and the on-disk cache of tuned configurations (see ``cache`` and ``gemm``)."""

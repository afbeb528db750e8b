"""Kernel families: one folder each (Python ops, CUDA sources in csrc/). See tk_kernels/README.md."""

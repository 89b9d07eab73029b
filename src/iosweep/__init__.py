"""iosweep: sweep instrumented Horovod training and compare its I/O across scale."""

__version__ = "0.1.0"

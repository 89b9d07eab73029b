"""Builders that only tests and benchmarks use: synthetic trace stores whose columns come
from the data model (:mod:`iosweep.trace.schema`). Nothing in the pipeline imports this."""

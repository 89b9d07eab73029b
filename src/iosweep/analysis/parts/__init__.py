"""A run analysed in parts: groups of whole ranks, each within the memory budget, their
results put together into the run's.

Data-parallel training spreads its I/O over ranks, and a store holds each rank's rows
together (:func:`iosweep.trace.store.rank_groups`), so a part reads only its ranks' row
groups (:mod:`.plan` cuts the parts). What a rank's own data decides (its (rank, file) rows,
its byte ranges per file, its time) is exact in its part; what spans ranks (a file's size
and sharing, a node's unique bytes, the ranks' median) is computed once the parts are put
together, from their rows, not from their summaries.

:mod:`.plan` cuts the parts, :mod:`.run` analyses one, :mod:`.combine` puts them together
(:mod:`.tables`: the (rank, file) tables' part). Most of the summary's sections are built
so far; docs/analysis.md ("Memory") lists what is not, and :mod:`iosweep.analysis.findings`
still analyses every run whole.
"""

"""A run analysed in parts: groups of whole ranks, each within the memory budget, their
results put together into the run's.

Data-parallel training spreads its I/O over ranks, and a store holds each rank's rows
together (:func:`iosweep.trace.store.rank_groups`), so a part reads only its ranks' row
groups (:mod:`.plan` cuts the parts). What a rank's own data decides (its (rank, file) rows,
its byte ranges per file, its time) is exact in its part; what spans ranks (a file's size
and sharing, a node's unique bytes, the ranks' median) is computed once the parts are put
together, from their rows, not from their summaries.

Built so far: the volume tables (:mod:`.tables`). The rest of the summary is still
analysed with the whole run in memory (docs/analysis.md, "Memory").
"""

"""The one path every run's analysis takes: a plan of parts, each part's figures, the run's
put together from them, written (``analyze_run``, :mod:`.analyze`).

A run whose need fits the memory budget is one part, its store read as it is. A larger one is
cut into parts of whole ranks, each within the budget: data-parallel training spreads its I/O
over ranks, and a store holds each rank's rows together
(:func:`iosweep.trace.store.rank_groups`), so a part reads only its ranks' row groups. What a
rank's own data decides (its (rank, file) rows, its byte ranges per file, its time) is exact
in its part; what spans ranks (a file's size and sharing, a node's unique bytes, the ranks'
median) is computed once the parts are put together, from their rows, not from their
summaries.

:mod:`.plan` makes the plan, :mod:`.run` analyses a part (:mod:`.facts`: what it hands on
besides its tables; :mod:`.results`: its frames and values, files or held in memory; the
sections registered in :mod:`iosweep.analysis.sections` add theirs), :mod:`.combine` puts
the parts together (:mod:`.tables`: the (rank, file) tables' part), :mod:`.analyze` runs the
whole and writes the run's analysis.
"""

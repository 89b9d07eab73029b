"""Turn a run's per-process trace logs into one trace store (issue 3: ingest and merge).

:func:`ingest` finds the logs under the given paths (both the workflow's run layout and a
plain directory of logs), reads each in isolation (a bad log becomes an :class:`Issue`, the
others go on), ties every log to a rank and host, puts all times on one clock and writes
the store with :func:`iosweep.trace.store.write_store`. How ranks, hosts and the clock are
recovered, and what ``merged.darshan`` holds (written on demand: :mod:`.merged`), is in
``docs/data-model.md`` ("Ingest and merge").
"""

from iosweep.trace.ingest.build import ingest, ingest_jobs, inputs_fingerprint
from iosweep.trace.ingest.find import discover
from iosweep.trace.ingest.merged import INPUTS_JSON, MERGED_DARSHAN, write_merged_darshan
from iosweep.trace.ingest.readlogs import read_workers

__all__ = [
    "INPUTS_JSON",
    "MERGED_DARSHAN",
    "discover",
    "ingest",
    "ingest_jobs",
    "inputs_fingerprint",
    "read_workers",
    "write_merged_darshan",
]

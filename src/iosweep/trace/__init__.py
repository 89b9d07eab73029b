"""The trace stage: data model, trace store, tracer readers (Darshan, DFTracer) and ingest."""

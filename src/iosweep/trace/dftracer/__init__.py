"""DFTracer traces: decode lines (decode), rebuild file positions (positions), build tables (read)."""

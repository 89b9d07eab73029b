"""Darshan logs: check a log's layout (check), read it into the data model (read), write one (write)."""

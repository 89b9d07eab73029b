"""A run's summary made section by section, each section typed as it is made.

The analysis sets each section of ``summary.json`` as it computes it
(``sections["spatial"] = ...``); the section is checked there against its field of
:class:`~.run.RunSummary` and kept in its typed form, so that a section of the wrong shape is
named where it is made (its key, the field inside it, the problem), and the summary written
is put together from the typed sections (:meth:`SummarySections.model`). The findings that
read the sections made so far (the headline, the rules) read them as they were made.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from functools import cache
from typing import Any

from pydantic import TypeAdapter, ValidationError

from iosweep.analysis.summary.io import SummaryError
from iosweep.analysis.summary.run import RunSummary
from iosweep.files import json_safe


@cache
def _field(key: str) -> tuple[str, TypeAdapter[Any]]:
    """The model's name of section ``key`` (its alias in summary.json) and its type's
    adapter; SummaryError for a key the hand-off has no section for."""
    for name, f in RunSummary.model_fields.items():
        if (f.alias or name) == key:
            return name, TypeAdapter(f.annotation)  # type: ignore[arg-type]
    raise SummaryError(f"summary: no section {key!r} in the hand-off (analysis/summary/run.py)")


class SummarySections(Mapping[str, Any]):
    """The sections of one run's summary made so far: each typed when set (SummaryError
    naming the section and the field otherwise); read back as made."""

    def __init__(self) -> None:
        self._made: dict[str, Any] = {}  # by key, as the analysis made them
        self._typed: dict[str, Any] = {}  # by the model's field name

    def __setitem__(self, key: str, value: Any) -> None:
        name, adapter = _field(key)
        try:
            self._typed[name] = adapter.validate_python(json_safe(value))
        except ValidationError as e:
            first = e.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise SummaryError(
                f"summary section {key!r}: {where or '(the section)'}: {first['msg']} "
                f"({e.error_count()} problem(s))"
            ) from None
        self._made[key] = value

    def update(self, sections: Mapping[str, Any]) -> None:
        for key, value in sections.items():
            self[key] = value

    def __getitem__(self, key: str) -> Any:
        return self._made[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._made)

    def __len__(self) -> int:
        return len(self._made)

    def model(self, source: str = "summary") -> RunSummary:
        """The summary, put together from the typed sections (a section missing named)."""
        try:
            return RunSummary.model_validate(self._typed)
        except ValidationError as e:
            first = e.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise SummaryError(f"{source}: {where}: {first['msg']}") from None

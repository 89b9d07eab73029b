"""Report settings: the ``report:`` section of the workflow config, 1:1."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any


@dataclass
class ReportSettings:
    """How the report is drawn. Keys and defaults match ``workflow/schemas/config.schema.yaml``."""

    title: str = "iosweep I/O report"
    anonymize: bool = False  # replace user names and path prefixes everywhere
    max_points_per_plot: int = (
        200_000  # above this, per-operation plots show a deterministic sample
    )
    figure_dpi: int = 100
    max_html_mb: float = 18.0  # the HTML stays under this: figures that do not fit are linked

    def __post_init__(self) -> None:
        if not isinstance(self.title, str):
            raise TypeError(f"report setting 'title': {self.title!r} is not a string")
        if not isinstance(self.anonymize, bool):
            raise TypeError(f"report setting 'anonymize': {self.anonymize!r} is not a boolean")
        for name, low, high in (("max_points_per_plot", 1000, None), ("figure_dpi", 30, 300)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < low or (high and v > high):
                span = f">= {low}" if high is None else f"in [{low}, {high}]"
                raise ValueError(f"report setting {name!r}: {v!r} must be an integer {span}")
        if isinstance(self.max_html_mb, bool) or not isinstance(self.max_html_mb, int | float):
            raise TypeError(f"report setting 'max_html_mb': {self.max_html_mb!r} is not a number")
        if not 1 <= self.max_html_mb <= 19.5:
            raise ValueError("report setting 'max_html_mb': must be between 1 and 19.5")

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> ReportSettings:
        """Settings from the config's ``report:`` mapping; unknown keys raise KeyError."""
        d = dict(d or {})
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise KeyError(
                f"unknown report setting {', '.join(map(repr, unknown))}; known: {', '.join(sorted(known))}"
            )
        return cls(**d)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

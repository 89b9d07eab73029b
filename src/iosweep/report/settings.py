"""Report settings: the ``report:`` section of the workflow config, 1:1 (keys, ranges,
defaults and meanings: the config schema, ``workflow/schemas/config.schema.yaml``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from iosweep.config import check_section, section_defaults


def _default(key: str) -> Callable[[], Any]:
    """The schema's default of ``key``, as a dataclass default factory."""
    return lambda: section_defaults("report")[key]


@dataclass
class ReportSettings:
    """How the report is drawn; defaults and checks from the config schema."""

    title: str = field(default_factory=_default("title"))
    anonymize: bool = field(default_factory=_default("anonymize"))
    max_points_per_plot: int = field(default_factory=_default("max_points_per_plot"))
    figure_dpi: int = field(default_factory=_default("figure_dpi"))
    max_html_mb: float = field(default_factory=_default("max_html_mb"))

    def __post_init__(self) -> None:
        check_section("report", asdict(self))
        self.max_html_mb = float(self.max_html_mb)

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> ReportSettings:
        """Settings from the config's ``report:`` mapping; an unknown key or a bad value
        raises a SettingsError (a ValueError; KeyError for unknown, TypeError for type)."""
        d = dict(d or {})
        check_section("report", {**section_defaults("report"), **d})
        return cls(**d)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

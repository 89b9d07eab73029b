"""Summary sections by one interface: a section's two halves, what a part takes from its
ranks and the run's section put together from every part's, registered by the room that
answers the section's question.

The analysis goes over every registered section (:func:`sections`): :mod:`.parts.run` calls
``of_part`` for each part, :mod:`.parts.combine` calls ``of_run`` once the parts are in. So a
new section of this kind touches two modules: its room (its figures and its
:func:`register`) and the summary's model (:mod:`iosweep.analysis.summary.run`, the field it
fills). The rooms are found by importing every module of :data:`ROOMS` (a new module in one
of them is found too). Sections whose figures need the run's files or ranks tables put
together first (the classes, the checkpoints, the pipeline, ...) are wired by
:mod:`.parts.combine` itself.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import pandas as pd

if TYPE_CHECKING:
    from iosweep.analysis.data import RunData
    from iosweep.analysis.settings import AnalysisSettings

ROOMS = ("iosweep.analysis.patterns", "iosweep.analysis.pipeline")


class PartOut(Protocol):
    """Where a part's section puts its figures (:class:`~.parts.results.PartResults`)."""

    def put(
        self,
        name: str,
        df: pd.DataFrame,
        paths: list[str] | None = None,
        by_bucket: bool = False,
        group_rows: int | None = None,
    ) -> None:
        """A frame; ``paths``: its ``file`` column's codes index them."""

    def put_json(self, name: str, value: Any) -> None:
        """A value JSON can hold."""


class PartsIn(Protocol):
    """What the run's section reads: every part's figures (``combine``'s parts)."""

    @property
    def settings(self) -> AnalysisSettings:
        """The run's analysis settings."""

    def frames(self, name: str, coded: bool = False) -> list[pd.DataFrame]:
        """The parts' frames ``name`` (those that put one); ``coded``: files as the run's
        codes (into the run's paths)."""

    def values(self, name: str) -> list[Any]:
        """Each part's value ``name`` (:meth:`PartOut.put_json`)."""


@dataclass(frozen=True)
class Section:
    """A summary section: ``key`` in the summary; ``of_part``: a part's figures from its
    ranks' data, put into its results; ``of_run``: the run's section from every part's."""

    key: str
    of_part: Callable[[RunData, PartOut], None]
    of_run: Callable[[PartsIn], Any]


_REGISTERED: dict[str, Section] = {}


def register(section: Section) -> Section:
    """``section`` analysed for every run (its key once: a second is a mistake)."""
    if _REGISTERED.get(section.key, section) != section:
        raise ValueError(f"two summary sections are registered as {section.key!r}")
    _REGISTERED[section.key] = section
    return section


def sections() -> list[Section]:
    """Every registered section, in the order of their keys (each room imported first)."""
    for room in ROOMS:
        package = importlib.import_module(room)
        for m in pkgutil.iter_modules(package.__path__):
            importlib.import_module(f"{room}.{m.name}")
    return [_REGISTERED[k] for k in sorted(_REGISTERED)]

"""Summary sections by one interface: a section's two halves, what a part takes from its
ranks and the run's section put together from every part's, registered by the room that
answers the section's question.

The analysis goes over every registered section (:func:`sections`): :mod:`.parts.run` calls
``of_part`` for each part, :mod:`.parts.combine` calls ``of_run`` once the parts are in and
the run's files and ranks tables are put together (``of_run`` reads them through
:class:`PartsIn`). So a new section touches two modules: its room (its figures and its
:func:`register`) and the summary's model (:mod:`iosweep.analysis.summary.run`, the field it
fills). Its part files are named in its room and read only there. The rooms are found by
importing every module of :data:`ROOMS` (a new module in one of them is found too).

What is not a section of this kind is made by :mod:`.parts.combine` itself: what the passes
over the run's files make as they put its tables together (the classes, the sharing of
files, the dataset's read shapes), what the passes need first (the MPI-IO layer), the
placement (its union of time spans is worked out beside the passes), the sample of
operations and the heatmap (a second pass over them), and the run's own sections (its
status, trace, ranks, headline and findings).
"""

from __future__ import annotations

import graphlib
import importlib
import pkgutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from iosweep.analysis.data import RunData
    from iosweep.analysis.patterns.file_ranks import FileRankFacts
    from iosweep.analysis.patterns.spatial import Spatial
    from iosweep.analysis.patterns.volume import Tables
    from iosweep.analysis.settings import AnalysisSettings
    from iosweep.trace.schema import RunMeta

ROOMS = ("iosweep.analysis.patterns", "iosweep.analysis.pipeline")


@dataclass
class PartIn:
    """What a part's section reads: the part's data (tracer artefacts out), whether it is
    its run's only part, each operation's epoch (the run's epochs: ranks that logged no
    steps of their own read in them), its operations' spatial categories and each file's
    size as the part's ranks see it (the furthest byte any of them touched)."""

    rd: RunData
    alone: bool
    op_epoch: np.ndarray
    spatial: Spatial
    file_size: np.ndarray


class PartsError(ValueError):
    """The run cannot be analysed in parts (yet)."""


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
    """What the run's section reads: every part's figures and the run put together so far
    (``combine``'s parts)."""

    @property
    def settings(self) -> AnalysisSettings:
        """The run's analysis settings."""

    @property
    def meta(self) -> RunMeta:
        """The run's (or the ranks analysed, ``--ranks``)."""

    @property
    def paths(self) -> list[str]:
        """The run's paths: its frames' ``file`` codes (``coded``) index them."""

    @property
    def class_names(self) -> list[str]:
        """The file classes, in the order of the tables' class codes."""

    @property
    def start(self) -> float:
        """The run's first time (seconds, as its operations')."""

    @property
    def end(self) -> float:
        """The run's last time."""

    @property
    def n_ranks(self) -> int:
        """The run's ranks (or processes)."""

    @property
    def run_time(self) -> float:
        """The run's seconds (0 where unknown)."""

    @property
    def counted(self) -> bool:
        """Whether the run has Darshan counter records."""

    @property
    def tables(self) -> Tables:
        """The run's files, ranks and nodes tables."""

    @property
    def rows(self) -> FileRankFacts:
        """What the run's (rank, file) rows give (never held whole)."""

    @property
    def checkpoint_rows(self) -> pd.DataFrame:
        """The (rank, file) rows of the checkpoint files."""

    @property
    def windows(self) -> pd.DataFrame:
        """The run's epochs (epoch, start, end) from its steps."""

    @property
    def made(self) -> Mapping[str, Any]:
        """The summary's sections made so far: those a section runs ``after`` among them."""

    def frames(self, name: str, coded: bool = False) -> list[pd.DataFrame]:
        """The parts' frames ``name`` (those that put one); ``coded``: files as the run's
        codes (into the run's paths)."""

    def values(self, name: str) -> list[Any]:
        """Each part's value ``name`` (:meth:`PartOut.put_json`)."""

    def table(self, name: str, df: pd.DataFrame) -> None:
        """The analysis table ``name`` (``<name>.parquet``) the section made."""


@dataclass(frozen=True)
class Section:
    """A summary section: ``key`` in the summary; ``of_part``: a part's figures from its
    ranks' data, put into its results; ``of_run``: the run's section from every part's;
    ``after``: the sections whose run value ``of_run`` reads (:attr:`PartsIn.made`)."""

    key: str
    of_part: Callable[[PartIn, PartOut], None]
    of_run: Callable[[PartsIn], Any]
    after: tuple[str, ...] = ()


_REGISTERED: dict[str, Section] = {}


def register(section: Section) -> Section:
    """``section`` analysed for every run (its key once: a second is a mistake)."""
    if _REGISTERED.get(section.key, section) != section:
        raise ValueError(f"two summary sections are registered as {section.key!r}")
    _REGISTERED[section.key] = section
    return section


def sections() -> list[Section]:
    """Every registered section (each room imported first), in rounds: each round the
    sections whose ``after`` are made, by key."""
    for room in ROOMS:
        package = importlib.import_module(room)
        for m in pkgutil.iter_modules(package.__path__):
            importlib.import_module(f"{room}.{m.name}")
    order = graphlib.TopologicalSorter({k: () for k in _REGISTERED})
    for key in sorted(_REGISTERED):
        unknown = set(_REGISTERED[key].after) - _REGISTERED.keys()
        if unknown:
            raise ValueError(f"summary section {key!r} runs after unknown {sorted(unknown)}")
        order.add(key, *_REGISTERED[key].after)
    order.prepare()
    found: list[str] = []
    while order.is_active():
        ready = sorted(order.get_ready())
        found += ready
        order.done(*ready)
    return [_REGISTERED[k] for k in found]

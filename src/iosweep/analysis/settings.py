"""Analysis settings: the ``analysis:`` section of the workflow config, 1:1.

Keys, types, ranges, defaults and meanings are defined once, in the config schema
(``workflow/schemas/config.schema.yaml``, section ``analysis``; listed in config/README.md).
Sizes are bytes, times seconds, shares fractions in [0, 1].
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from iosweep.config import SettingsError, check_section, section_defaults

OTHER = "other"


def _default(key: str) -> Callable[[], Any]:
    """The schema's default of ``key``, as a dataclass default factory."""
    return lambda: section_defaults("analysis")[key]


@dataclass
class AnalysisSettings:
    """Thresholds and rules of the analysis; defaults and checks from the config schema."""

    file_classes: list[dict[str, str]] = field(default_factory=_default("file_classes"))
    exclude_pattern: str = field(default_factory=_default("exclude_pattern"))
    modules: list[str] = field(default_factory=_default("modules"))
    small_request_bytes: int = field(default_factory=_default("small_request_bytes"))
    top_sizes: int = field(default_factory=_default("top_sizes"))
    whole_file_coverage: float = field(default_factory=_default("whole_file_coverage"))
    disjoint_overlap_max: float = field(default_factory=_default("disjoint_overlap_max"))
    strategy_dominance: float = field(default_factory=_default("strategy_dominance"))
    fpp_max_files_per_rank: int = field(default_factory=_default("fpp_max_files_per_rank"))
    phase_gap_s: float = field(default_factory=_default("phase_gap_s"))
    phases: dict[str, list[dict[str, str]]] = field(default_factory=_default("phases"))
    signature_max_runs: int = field(default_factory=_default("signature_max_runs"))
    straggler_excess: float = field(default_factory=_default("straggler_excess"))
    straggler_min_io_time_s: float = field(default_factory=_default("straggler_min_io_time_s"))
    small_requests_share: float = field(default_factory=_default("small_requests_share"))
    small_requests_min_count: int = field(default_factory=_default("small_requests_min_count"))
    random_ops_share: float = field(default_factory=_default("random_ops_share"))
    random_ops_min_count: int = field(default_factory=_default("random_ops_min_count"))
    metadata_time_share: float = field(default_factory=_default("metadata_time_share"))
    metadata_min_time_s: float = field(default_factory=_default("metadata_min_time_s"))
    metadata_rank_time_s: float = field(default_factory=_default("metadata_rank_time_s"))
    redundant_read_min_ranks: int = field(default_factory=_default("redundant_read_min_ranks"))
    redundant_read_min_bytes: int = field(default_factory=_default("redundant_read_min_bytes"))
    redundant_write_min_bytes: int = field(default_factory=_default("redundant_write_min_bytes"))
    fpp_min_ranks: int = field(default_factory=_default("fpp_min_ranks"))
    rank0_checkpoint_min_ranks: int = field(default_factory=_default("rank0_checkpoint_min_ranks"))
    imbalance_share: float = field(default_factory=_default("imbalance_share"))
    imbalance_min_io_time_s: float = field(default_factory=_default("imbalance_min_io_time_s"))
    imbalance_min_bytes: int = field(default_factory=_default("imbalance_min_bytes"))
    misaligned_share: float = field(default_factory=_default("misaligned_share"))
    misaligned_min_count: int = field(default_factory=_default("misaligned_min_count"))
    mpiio_overhead_share: float = field(default_factory=_default("mpiio_overhead_share"))
    mpiio_overhead_min_s: float = field(default_factory=_default("mpiio_overhead_min_s"))
    mpiio_independent_share: float = field(default_factory=_default("mpiio_independent_share"))
    mpiio_independent_min_count: int = field(
        default_factory=_default("mpiio_independent_min_count")
    )
    stdio_share: float = field(default_factory=_default("stdio_share"))
    io_time_share: float = field(default_factory=_default("io_time_share"))
    exposed_io_share: float = field(default_factory=_default("exposed_io_share"))
    trace_completeness_min: float = field(default_factory=_default("trace_completeness_min"))
    tracer_overhead_share: float = field(default_factory=_default("tracer_overhead_share"))
    plot_sample_ops: int = field(default_factory=_default("plot_sample_ops"))
    au_threshold: float = field(default_factory=_default("au_threshold"))
    storage_wait_share: float = field(default_factory=_default("storage_wait_share"))
    input_wait_share: float = field(default_factory=_default("input_wait_share"))
    startup_share: float = field(default_factory=_default("startup_share"))
    wait_grades: list[float] = field(default_factory=_default("wait_grades"))
    phase_start_share: float = field(default_factory=_default("phase_start_share"))
    min_steady_share: float = field(default_factory=_default("min_steady_share"))
    min_steady_steps: int = field(default_factory=_default("min_steady_steps"))
    lever_min_gain: float = field(default_factory=_default("lever_min_gain"))
    fs_bandwidth: float | None = field(default_factory=_default("fs_bandwidth"))
    fs_metadata_rate: float | None = field(default_factory=_default("fs_metadata_rate"))
    table_max_files: int = field(default_factory=_default("table_max_files"))
    memory_gb: float | None = field(default_factory=_default("memory_gb"))
    timeline: dict[str, Any] = field(default_factory=_default("timeline"))

    def __post_init__(self) -> None:
        check_section("analysis", asdict(self))
        for f in fields(self):  # a share or time given as 1 is still a float
            if f.type == "float":
                setattr(self, f.name, float(getattr(self, f.name)))
        self.wait_grades = [float(g) for g in self.wait_grades]
        if self.wait_grades[0] > self.wait_grades[1]:
            raise SettingsError(
                f"analysis.wait_grades: {self.wait_grades}: the moderate grade's share must not "
                "be above the high grade's"
            )

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> AnalysisSettings:
        """Settings from the config's ``analysis:`` mapping; an unknown key or a bad value
        raises a SettingsError (a ValueError; KeyError for unknown, TypeError for type)."""
        d = dict(d or {})
        defaults = section_defaults("analysis")
        if isinstance(d.get("phases"), dict):  # a kind given replaces that kind's defaults only
            d["phases"] = {**defaults["phases"], **d["phases"]}
        if isinstance(d.get("timeline"), dict):  # keys not given keep their defaults
            d["timeline"] = {**defaults["timeline"], **d["timeline"]}
        check_section("analysis", {**defaults, **d})
        return cls(**d)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def class_names(self) -> list[str]:
        """Every class in rule order, ``other`` last (a rule may name ``other`` too)."""
        names = dict.fromkeys(c["name"] for c in self.file_classes if c["name"] != OTHER)
        return [*names, OTHER]


PHASE_KINDS = ("compute", "fetch", "epoch", "evaluation", "checkpoint", "app_io")
PHASE_HELP = (
    "which application events are KIND (compute, fetch, epoch, evaluation, checkpoint, "
    "app_io), by category and/or "
    "name (Python regexes, searched); repeat for several rules; the rules given for a kind "
    "replace its defaults (analysis.phases in the config). E.g. --phase "
    "compute:cat=computation --phase fetch:name='\\.iter$' --phase "
    "compute:cat=ai_framework:name='\\.compute$'"
)


def parse_phase(text: str) -> tuple[str, dict[str, str]]:
    """``compute:cat=RX:name=RX`` -> ("compute", {"cat": RX, "name": RX}); ValueError naming
    what is wrong."""
    kind, _, rest = text.partition(":")
    rule: dict[str, str] = {}
    for part in [x for x in re.split(r":(?=(?:cat|name)=)", rest) if x]:
        key, eq, rx = part.partition("=")
        if key not in ("cat", "name") or not eq:
            raise ValueError(
                f"--phase {text!r}: expected cat=REGEX and/or name=REGEX after {kind}:"
            )
        try:
            re.compile(rx)
        except re.error as e:
            raise ValueError(f"--phase {text!r}: {key}={rx!r} is not a regex: {e}") from None
        rule[key] = rx
    if kind not in PHASE_KINDS or not rule:
        raise ValueError(
            f"--phase {text!r}: expected KIND:cat=REGEX[:name=REGEX] with KIND one of "
            f"{', '.join(PHASE_KINDS)}"
        )
    return kind, rule


def parse_phases(texts: list[str]) -> dict[str, list[dict[str, str]]]:
    """Several ``--phase`` options: kind -> its rules, in the order given."""
    given: dict[str, list[dict[str, str]]] = {}
    for kind, rule in map(parse_phase, texts):
        given.setdefault(kind, []).append(rule)
    return given

r"""Analysis settings: the ``analysis:`` section of the workflow config, 1:1.

Every key below may appear in ``config.yaml`` under ``analysis:``; unknown keys are rejected
(``AnalysisSettings.from_dict``). Sizes are bytes, times seconds, shares fractions in [0, 1].

| key | type | default | meaning |
|---|---|---|---|
| `file_classes` | list of `{name, pattern}` | software -> `other`, then `checkpoint`, then `dataset` (see `DEFAULT_FILE_CLASSES`) | ordered rules; a file's class is the `name` of the first rule whose Python regex `re.search`-matches its path; no match -> `other`. Several rules may name one class; a rule naming `other` keeps files out of later rules |
| `exclude_pattern` | regex | `^<STD(IN\|OUT\|ERR)>$\|^/dev/\|^/proc/\|^/sys/` | paths left out of the analysis entirely; `""` keeps all |
| `modules` | list of str | `[POSIX, STDIO]` | tracer modules analysed; MPIIO is left out by default because the POSIX calls under it are traced too |
| `small_request_bytes` | int | 1048576 | a request of more than 0 and fewer than this many bytes is "small" (Drishti's and Darshan's 1 MiB boundary) |
| `top_sizes` | int | 10 | how many most common exact request sizes to list |
| `whole_file_coverage` | share | 0.99 | a rank reads (writes) a file whole when its operations cover at least this share of the file's size |
| `disjoint_overlap_max` | share | 0.01 | a shared file is `shared-disjoint` when the bytes touched by 2+ ranks are at most this share of the bytes touched |
| `strategy_dominance` | share | 0.9 | a class gets one access strategy when the files carrying this share of its bytes follow it; else `mixed` |
| `fpp_max_files_per_rank` | int | 4 | unshared files: up to this many per rank is `file-per-process`, more is `partitioned` |
| `phase_gap_s` | seconds | 1.0 | operations (of any rank) closer than this belong to one I/O phase; also merges checkpoint writes into one checkpoint |
| `compute_event_pattern` | regex | `(?i)comput` | DFTracer app events whose category or name matches count as compute, besides the manifest's steps |
| `signature_max_runs` | int | 20 | runs of operations shown in a rank's signature text (the comparison between ranks uses all) |
| `straggler_excess` | share | 0.5 | a rank is a straggler when its I/O time exceeds the median rank's by more than this share ... |
| `straggler_min_io_time_s` | seconds | 0.1 | ... and is at least this long |
| `small_requests_share` | share | 0.1 | insight `small_requests`: small requests above this share of a direction's requests ... |
| `small_requests_min_count` | int | 1000 | ... and at least this many (Drishti's thresholds) |
| `random_ops_share` | share | 0.2 | insight `random_access`: backward jumps above this share of operations ... |
| `random_ops_min_count` | int | 1000 | ... and at least this many |
| `metadata_time_share` | share | 0.3 | insight `metadata_heavy`: metadata above this share of I/O time ... |
| `metadata_min_time_s` | seconds | 1.0 | ... and at least this much metadata time on the busiest rank |
| `redundant_read_min_ranks` | int | 2 | insight `redundant_reads`: files read by at least this many ranks ... |
| `redundant_read_min_bytes` | int | 1048576 | ... with at least this many bytes read more than once |
| `fpp_min_ranks` | int | 64 | insight `file_per_process_at_scale`: a file-per-process class in a run of at least this many ranks |
| `rank0_checkpoint_min_ranks` | int | 2 | insight `single_rank_checkpoint`: one rank writes every checkpoint in a run of at least this many ranks |
| `imbalance_share` | share | 0.3 | insight `imbalance`: (max - min) / max across ranks of bytes or of I/O time above this ... |
| `imbalance_min_io_time_s` | seconds | 0.1 | ... (for I/O time: when the slowest rank spends at least this) |
| `io_time_share` | share | 0.2 | insight `io_bound`: the busiest rank's I/O wall time above this share of the run time |
| `exposed_io_share` | share | 0.1 | insight `exposed_io`: a rank's I/O not overlapped with compute above this share of its epochs' time |
| `trace_completeness_min` | share | 0.99 | insight `truncated_trace`: traced (DXT) operations below this share of those the counters saw; any error issue fires it too |
| `tracer_overhead_share` | share | 0.05 | sweep insight `tracer_overhead`: traced run time above the untraced (`tracer: none`) baseline by more than this share |
| `plot_sample_ops` | int | 200000 | operations kept in `ops_sample.parquet`, the table the report's per-operation plots draw; above it a deterministic sample per file class and direction |
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, fields
from typing import Any

DEFAULT_FILE_CLASSES: list[dict[str, str]] = [
    # Software first: Python packages and shared libraries (``.pth`` path files in
    # site-packages would otherwise look like PyTorch checkpoints).
    {
        "name": "other",
        "pattern": r"/(site|dist)-packages/|/lib/python\d[\d.]*/|\.py[cdo]?$|\.so(\.\d+)*$",
    },
    # Checkpoints next: their names say so explicitly, while dataset rules match broad
    # directory names (/train/) that a checkpoint directory may sit under.
    {
        "name": "checkpoint",
        "pattern": r"(?i)checkpoint|ckpt|\.pth?$|\.pth\.tar$|\.keras$|\.safetensors$"
        r"|\.index$|\.data-\d+-of-\d+$|/checkpoints?/",
    },
    {
        "name": "dataset",
        "pattern": r"(?i)idx[13]-ubyte(\.gz)?$|\.npz$|\.npy$|\.tfrecords?$|\.tfrec$|\.jpe?g$"
        r"|\.png$|\.bmp$|\.h5$|\.hdf5$|\.parquet$|\.csv$|\.rec$|\.lmdb$|\.mdb$|\.tar$"
        r"|\.bin$|\.arrow$|/train/|/val/|/valid/|/validation/|/test/",
    },
]

DEFAULT_EXCLUDE = r"^<STD(IN|OUT|ERR)>$|^/dev/|^/proc/|^/sys/"

OTHER = "other"


@dataclass
class AnalysisSettings:
    """Thresholds and rules of the analysis (table of keys in the module docstring)."""

    file_classes: list[dict[str, str]] = field(
        default_factory=lambda: [dict(c) for c in DEFAULT_FILE_CLASSES]
    )
    exclude_pattern: str = DEFAULT_EXCLUDE
    modules: list[str] = field(default_factory=lambda: ["POSIX", "STDIO"])
    small_request_bytes: int = 1048576
    top_sizes: int = 10
    whole_file_coverage: float = 0.99
    disjoint_overlap_max: float = 0.01
    strategy_dominance: float = 0.9
    fpp_max_files_per_rank: int = 4
    phase_gap_s: float = 1.0
    compute_event_pattern: str = r"(?i)comput"
    signature_max_runs: int = 20
    straggler_excess: float = 0.5
    straggler_min_io_time_s: float = 0.1
    small_requests_share: float = 0.1
    small_requests_min_count: int = 1000
    random_ops_share: float = 0.2
    random_ops_min_count: int = 1000
    metadata_time_share: float = 0.3
    metadata_min_time_s: float = 1.0
    redundant_read_min_ranks: int = 2
    redundant_read_min_bytes: int = 1048576
    fpp_min_ranks: int = 64
    rank0_checkpoint_min_ranks: int = 2
    imbalance_share: float = 0.3
    imbalance_min_io_time_s: float = 0.1
    io_time_share: float = 0.2
    exposed_io_share: float = 0.1
    trace_completeness_min: float = 0.99
    tracer_overhead_share: float = 0.05
    plot_sample_ops: int = 200000

    def __post_init__(self) -> None:
        self.validate()

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> AnalysisSettings:
        """Settings from the config's ``analysis:`` mapping; unknown keys raise KeyError."""
        d = dict(d or {})
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise KeyError(
                f"unknown analysis setting {', '.join(map(repr, unknown))}; "
                f"known: {', '.join(sorted(known))}"
            )
        return cls(**d)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def validate(self) -> None:
        """Raise TypeError/ValueError naming the first bad setting."""
        for f in fields(self):
            v = getattr(self, f.name)
            default = f.default_factory() if callable(f.default_factory) else f.default
            if isinstance(default, bool | str):
                if not isinstance(v, type(default)):
                    raise TypeError(
                        f"analysis setting {f.name!r}: {v!r} is not a {type(default).__name__}"
                    )
            elif isinstance(default, int):
                if isinstance(v, bool) or not isinstance(v, int):
                    raise TypeError(f"analysis setting {f.name!r}: {v!r} is not an integer")
                if v < 0:
                    raise ValueError(f"analysis setting {f.name!r}: {v!r} must be >= 0")
            elif isinstance(default, float):
                if isinstance(v, bool) or not isinstance(v, int | float):
                    raise TypeError(f"analysis setting {f.name!r}: {v!r} is not a number")
                if v < 0:
                    raise ValueError(f"analysis setting {f.name!r}: {v!r} must be >= 0")
                setattr(self, f.name, float(v))
        for name in ("whole_file_coverage", "disjoint_overlap_max", "strategy_dominance"):
            if getattr(self, name) > 1:
                raise ValueError(f"analysis setting {name!r}: must be a fraction in [0, 1]")
        if not isinstance(self.modules, list) or not all(isinstance(m, str) for m in self.modules):
            raise TypeError(f"analysis setting 'modules': {self.modules!r} is not a list of names")
        if not isinstance(self.file_classes, list):
            raise TypeError("analysis setting 'file_classes': must be a list of {name, pattern}")
        for i, c in enumerate(self.file_classes):
            if not isinstance(c, dict) or set(c) != {"name", "pattern"}:
                raise ValueError(
                    f"analysis setting 'file_classes[{i}]': {c!r} must be a mapping with "
                    "exactly the keys 'name' and 'pattern'"
                )
            if not re.fullmatch(r"[a-z][a-z0-9_]*", str(c["name"])):
                raise ValueError(
                    f"analysis setting 'file_classes[{i}].name': {c['name']!r} must be a "
                    "snake_case word"
                )
            _compile(f"file_classes[{i}].pattern", c["pattern"])
        _compile("exclude_pattern", self.exclude_pattern)
        _compile("compute_event_pattern", self.compute_event_pattern)

    @property
    def class_names(self) -> list[str]:
        """Every class in rule order, ``other`` last (a rule may name ``other`` too)."""
        names = dict.fromkeys(c["name"] for c in self.file_classes if c["name"] != OTHER)
        return [*names, OTHER]


def _compile(key: str, pattern: Any) -> re.Pattern[str] | None:
    if not isinstance(pattern, str):
        raise TypeError(f"analysis setting {key!r}: {pattern!r} is not a string")
    try:
        return re.compile(pattern) if pattern else None
    except re.error as e:
        raise ValueError(f"analysis setting {key!r}: {pattern!r} is not a valid regex: {e}") from e

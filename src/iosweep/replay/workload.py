"""Write the DLIO workload that replays a measured run (``iosweep replay``, rule
``replay_workload``): measure (iosweep.replay.measure), link the run's files as DLIO lists
them, calibrate, write (iosweep.replay.dlio)."""

from __future__ import annotations

import datetime
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from iosweep.analysis.parts.run import load_analysed
from iosweep.analysis.settings import AnalysisSettings
from iosweep.files import write_text
from iosweep.replay import dlio
from iosweep.replay.measure import Measured, ReplayError, ReplayMeasures, measure_replay


@dataclass
class Replay:
    workload: Path  # DIR/workload/NAME.yaml
    measures: ReplayMeasures
    entries: list[dlio.Entry]

    def value(self, key: str) -> Any:
        return next(v for _, k, v, _ in self.entries if k == key)


def check_workload_path(out: Path) -> Path:
    out = out.absolute()
    if out.parent.name != "workload" or out.suffix != ".yaml":
        raise ReplayError(
            f"{out}: write it as DIR/workload/NAME.yaml (DLIO reads workloads from the "
            "workload/ folder of its --config-dir, by NAME)"
        )
    return out


def _header(m: ReplayMeasures, store: Path, out: Path) -> list[str]:
    f, ranks = m.figures, int(m.value("ranks"))
    au, sps, v = (f[k].value for k in ("au", "samples_per_s", "verdict"))
    answer = (
        f"AU {au:.1%}, {sps:,.1f} samples/s, verdict {v}"
        if isinstance(au, float) and isinstance(sps, float)
        else f"verdict {v}"
    )
    return [
        f"DLIO workload replaying iosweep run {m.run_id} (store {store.resolve()}),",
        f"written by `iosweep replay` on {datetime.date.today().isoformat()}.",
        f"The run: {ranks} rank(s); {answer}.",
        f"Run it (any -np): mpirun -np {ranks} dlio_benchmark --config-dir {out.parent.parent} "
        f"workload={out.stem} hydra.run.dir=OUT",
        "",
    ]


def _write(
    m: ReplayMeasures,
    store: Path,
    out: Path,
    data: Path,
    settings: AnalysisSettings,
    decode: Measured,
    fixes: dict[str, Measured] | None = None,
) -> list[dlio.Entry]:
    entries = dlio.replay_entries(
        m,
        decode=decode,
        data_folder=data,
        generate=not m.files_here,
        checkpoint_folder=out.parent.parent / f"{out.stem}-checkpoints",
        au_threshold=settings.au_threshold,
        fixes=fixes,
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    write_text(out, dlio.workload_text(m, entries, _header(m, store, out)))
    return entries


def write_replay(
    store: Path,
    summary: dict[str, Any],
    out: Path,
    *,
    data_folder: Path | None = None,
    calibrate: Path | None = None,
    log: Callable[[str], None] = print,
) -> Replay:
    """Measure the run (its trace store and its analysis ``summary``), write its DLIO
    workload to ``out`` (DIR/workload/NAME.yaml) and the dataset's links to ``data_folder``
    (default DIR/NAME-data); with ``calibrate`` (a folder for DLIO's outputs), run it once
    at the run's scale and correct the per-sample and per-step times by DLIO's overheads.
    Raises ReplayError (what cannot be measured or replayed) or DlioError (DLIO failed)."""

    out = check_workload_path(out)
    settings = AnalysisSettings.from_dict(summary.get("settings") or {})
    m = measure_replay(load_analysed(store, settings), summary)
    data = (data_folder or out.parent.parent / f"{out.stem}-data").absolute()
    fmt = dlio.dlio_format(m)
    if m.files_here:
        dlio.link_dataset(m, fmt, data)
        decode = dlio.calibrate_decode(m.paths)
    else:
        decode = m.figures["sample_read_time"]
        m.limits.append(
            "the run's files are not on this machine: DLIO makes its own (its JPEG maker writes "
            "noise images, smaller than record_length and cheaper to decode), and the time "
            "inside the run's reads stands in for DLIO's load of a sample (not calibrated)"
        )
    entries = _write(m, store, out, data, settings, decode)
    if calibrate:
        log(f"calibrating: DLIO on {m.value('ranks')} rank(s), outputs in {calibrate}")
        fixes = dlio.calibrate(m, out.parent.parent, out.stem, calibrate, settings)
        if short := dlio.calibration_shortfall(m, decode, fixes["sample_time"]):
            m.limits.append(short)
        entries = _write(m, store, out, data, settings, decode, fixes)
    return Replay(out, m, entries)

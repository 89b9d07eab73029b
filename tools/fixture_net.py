#!/usr/bin/env python3
"""The refactoring net: every shared fixture through ingest, analysis and report, its outputs
saved in a normalised, diffable form.

    python tools/fixture_net.py OUT [--shared ../shared] [--only GROUP]
    diff -r OUT.before OUT.after

Per fixture group (runs that belong together, e.g. the PyTorch MNIST np1/np2/np4 runs) it
ingests every run into a trace store, analyses them as one sweep and renders their report,
then writes under ``OUT/<group>/``:

- ``<run>/summary.json``: the summary with machine-dependent values (paths, generation
  times) replaced by placeholders;
- ``<run>/<table>.csv``: every analysis table, rows sorted;
- ``sweep/*``: the sweep files (CSV sorted, JSON as written);
- ``report.txt``: the report's visible text, one element per line, times and commits masked;
- ``figures.txt``: the sha256 of every figure PNG.

Run it before moving code and after; every difference in ``diff -r`` must be explained.
"""

from __future__ import annotations

import argparse
import hashlib
import html.parser
import json
import re
import shutil
import sys
import tempfile
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from iosweep.analysis import analyze_run, analyze_sweep  # noqa: E402
from iosweep.report import render_report  # noqa: E402
from iosweep.trace.ingest import ingest_jobs  # noqa: E402

GROUPS: dict[str, list[str]] = {
    "pytorch-darshan": [f"horovod-pytorch-mnist/darshan-np{n}" for n in (1, 2, 4)]
    + ["horovod-pytorch-mnist/darshan-2nodes-np4", "horovod-pytorch-mnist/darshan-live-np2"],
    "pytorch-dftracer": [f"horovod-pytorch-mnist/dftracer-np{n}" for n in (1, 2, 4)],
    "tf2": [f"horovod-tf2-mnist/{t}-np{n}" for t in ("darshan", "dftracer") for n in (1, 2, 4)],
    "imagenet": [
        f"imagenet-style-resnet50-h100/{r}"
        for r in (
            "darshan2",
            "darshan8",
            "darshan16",
            "darshan8shm",
            "dftracer8",
            "none8",
            "none16",
            "none8shm",
        )
    ],
    "dlio": ["darshan-logs/dlio_logs"],
    "mpi": ["darshan-logs/mpi_io_test_with_dxt", "darshan-logs/release_logs"],
    "single-logs": [
        "darshan-logs/nonmpi_dxt_anonymized",
        "darshan-logs/stdio_no_posix",
        "darshan-logs/empty_log",
    ],
    "partial": ["darshan-logs/partial_data_dxt", "darshan-logs/partial_data_stdio"],
}


class _Text(html.parser.HTMLParser):
    """The visible text of an HTML page, one block of text per line."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag, attrs):
        if tag in ("style", "script"):
            self._skip += 1

    def handle_endtag(self, tag):
        if tag in ("style", "script"):
            self._skip -= 1

    def handle_data(self, data):
        if not self._skip and data.strip():
            self.lines.append(" ".join(data.split()))


_MASKS = [
    (re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC"), "<time>"),
    (re.compile(r"\b[0-9a-f]{40}\b"), "<commit>"),
]


def _mask(text: str, tmp: str) -> str:
    text = text.replace(tmp, "<tmp>")
    for rx, sub in _MASKS:
        text = rx.sub(sub, text)
    return text


def _table_csv(src: Path, dst: Path, tmp: str) -> None:
    df = pd.read_parquet(src)
    for c in df.columns:  # categoricals and dictionaries sort as their strings
        if isinstance(df[c].dtype, pd.CategoricalDtype):
            df[c] = df[c].astype(str)
    df = df.sort_values(list(df.columns), kind="stable") if len(df) else df
    dst.write_text(_mask(df.to_csv(index=False, float_format="%.9g"), tmp))


def _group(name: str, rels: list[str], shared: Path, out: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="iosweep-net-") as t:
        tmp = Path(t)
        analyses = []
        for rel in rels:
            src = shared / "data" / rel
            if not src.is_dir():
                print(f"  {rel}: missing, skipped", file=sys.stderr)
                continue
            run = rel.replace("/", "_")
            man = src / "manifest.json"
            # logs of several jobs (release_logs) give one store, and one run, per job
            stores = ingest_jobs(
                [src], tmp / run / "store", manifest=man if man.exists() else None, run_id=run
            )
            for store, meta in stores:
                name_ = run if len(stores) == 1 else meta.run_id
                analyze_run(store, tmp / name_ / "analysis")
                analyses.append(tmp / name_ / "analysis")
        analyze_sweep(analyses, tmp / "sweep")
        html_file = render_report(analyses, tmp / "sweep", tmp / "report" / "report.html")
        g = out / name
        for a in analyses:
            d = g / a.parent.name
            d.mkdir(parents=True, exist_ok=True)
            sm = json.loads((a / "summary.json").read_text())
            (d / "summary.json").write_text(_mask(json.dumps(sm, indent=1, sort_keys=True), t))
            for f in sorted(a.glob("*.parquet")):
                _table_csv(f, d / f"{f.stem}.csv", t)
        (g / "sweep").mkdir(parents=True, exist_ok=True)
        for f in sorted((tmp / "sweep").iterdir()):
            if f.suffix == ".parquet":
                _table_csv(f, g / "sweep" / f"{f.stem}.parquet.csv", t)
            elif f.suffix == ".csv":
                continue  # the same table as sweep.parquet
            else:
                (g / "sweep" / f.name).write_text(_mask(f.read_text(), t))
        p = _Text()
        p.feed(html_file.read_text())
        (g / "report.txt").write_text(_mask("\n".join(p.lines), t) + "\n")
        figs = sorted((tmp / "report" / "figures").rglob("*.png"))
        (g / "figures.txt").write_text(
            "".join(
                f"{hashlib.sha256(f.read_bytes()).hexdigest()}  {f.relative_to(tmp / 'report')}\n"
                for f in figs
            )
        )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--shared", type=Path, default=ROOT.parent / "shared")
    ap.add_argument("--only", action="append", choices=sorted(GROUPS))
    args = ap.parse_args(argv)
    if args.out.exists():
        shutil.rmtree(args.out)
    for name in args.only or GROUPS:
        print(f"{name}: {len(GROUPS[name])} runs", file=sys.stderr)
        _group(name, GROUPS[name], args.shared, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

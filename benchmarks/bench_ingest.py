"""Benchmark: ingest of a whole run's Darshan logs against its floor and against PyDarshan.

On one run of real-format Darshan logs (default: the ImageNet-shaped run of
``iosweep.testing.imagenet_trace.write_imagenet_logs``, 1.28 M files read by 32 ranks x 8
loader workers, 2 epochs: 544 logs, 10.2 M DXT segments, 2.56 M POSIX records), each step in
a fresh interpreter, one after another on the same logs:

1. ``iosweep ingest`` with ``--workers 1`` and ``--workers 2`` (the two stores are compared
   table by table: they must be equal);
2. the floor, measured here without iosweep's code: (a) every log read and every region of
   it inflated with Python's zlib (what no reader of these logs can skip); (b) the store's
   tables, as ingest wrote them, written again with the same compression and row groups
   (what no writer of that store can skip);
3. PyDarshan 3.5.0, the tool users would otherwise use: ``DarshanReport(log, read_all=True)``
   on every log (reading only: it makes no store);
4. ``iosweep merge`` of the store: the merged Darshan log, on demand, against its own floor:
   every region read, inflated and deflated again as libdarshan-util's writer deflates
   (zlib level 6);
5. with ``--parts N``: the logs read in N parts (``iosweep ingest --part K/N``, two readers
   each, one after another: as N jobs of a node each would read them) and put together
   (``--from-parts``); the store is compared with the one-job store (it must be equal), and
   the time on N nodes is given as the slowest part plus the put-together.

Printed: wall time and peak RSS (``VmHWM``) of each, and the ratios the targets are stated
in: ingest on one core against the floor (a+b), and PyDarshan's read against ingest.

Usage: python benchmarks/bench_ingest.py [--logs DIR | --files 1281000 --epochs 2]
           [--keep DIR] [--no-pydarshan] [--no-merge] [--parts N]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pyarrow as pa
from bench_segments_scale import CHILD as SCALE_CHILD

GIB = 1 << 30
# a snippet measured as bench_segments_scale measures iosweep: its wall time and VmHWM printed
# at exit (the part of that script's CHILD before it runs the command line)
CHILD = SCALE_CHILD.split("from iosweep.cli")[0]
IOSWEEP = SCALE_CHILD

# read + inflate every region of every log (format 3.41: the name map at byte 32, 64 module
# slots from byte 48, each (offset, length); the job record from the header's end)
INFLATE = (
    CHILD
    + """
import glob, struct, zlib
total = 0
for f in sorted(glob.glob(sys.argv[1] + "/**/*.darshan", recursive=True)):
    data = open(f, "rb").read()
    assert data[:4] == b"3.41", f
    spans = [struct.unpack_from("<QQ", data, 32 + 16 * i) for i in range(65)]
    spans = [(o, n) for o, n in spans if n]
    head = 48 + 20 * 64
    spans.append((head, min(o for o, _ in spans) - head))
    for off, n in spans:
        rest = data[off:off + n]
        while rest:  # one stream per rank in an MPI log
            d = zlib.decompressobj()
            total += len(d.decompress(rest))
            rest = d.unused_data
print("INFLATED", total)
"""
)
# the merged log's floor: that, and the inflated bytes deflated again at the level
# libdarshan-util's writer uses (zlib's default, 6) as one stream (the merged log holds the
# same records, the ranks' processes folded into fewer)
MERGE_FLOOR = INFLATE.replace(
    "total += len(d.decompress(rest))",
    "z = zlib.compressobj(6)\n            total += len(z.compress(d.decompress(rest)) + z.flush())",
).replace('"INFLATED"', '"DEFLATED"')

# the store's tables written again: same compression, encodings and row groups
REWRITE = """
import sys, glob, time, json
import pyarrow as pa
import pyarrow.parquet as pq
tables = {}
for f in sorted(glob.glob(sys.argv[1] + "/*.parquet")):
    pf = pq.ParquetFile(f)
    groups = [pf.read_row_group(g) for g in range(pf.num_row_groups)]
    tables[f] = (pf.schema_arrow, groups, pf.metadata.row_group(0).column(0).compression
                 if pf.num_row_groups else "ZSTD")
t = time.perf_counter()
for f, (schema, groups, codec) in tables.items():
    # dictionary-encoded where the store is (its dictionary columns), as ingest writes it
    dictionaries = [f.name for f in schema if pa.types.is_dictionary(f.type)]
    with pq.ParquetWriter(sys.argv[2] + "/" + f.rsplit("/", 1)[1], schema,
                          compression=codec.lower(), use_dictionary=dictionaries) as w:
        for g in groups:
            if g.num_rows:  # (an empty table's one group of none: nothing to write)
                w.write_table(g, row_group_size=g.num_rows)
print("MEASURED " + json.dumps({"wall_s": time.perf_counter() - t, "peak": 0}), file=sys.stderr)
"""

PYDARSHAN = (
    CHILD
    + """
import glob, darshan
n = 0
for f in sorted(glob.glob(sys.argv[1] + "/**/*.darshan", recursive=True)):
    with darshan.DarshanReport(f, read_all=True) as r:
        n += len(r.records.get("DXT_POSIX", []))
print("DXT records", n)
"""
)


def measured(code: str, *args: str) -> dict:
    """Run ``code`` in a fresh interpreter; its wall time, peak RSS and exit status."""
    proc = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, check=False
    )
    line = next(
        (x for x in proc.stderr.splitlines() if x.startswith("MEASURED ")), 'MEASURED {"wall_s": 0}'
    )
    out = json.loads(line.removeprefix("MEASURED "))
    out["rc"] = proc.returncode
    if proc.returncode:
        print(proc.stderr[-3000:], file=sys.stderr)
    return out


def same_stores(a: Path, b: Path) -> list[str]:
    """The tables in which two stores differ (none: they are equal): row by row, value by
    value; a dictionary column's dictionary may list its values in another order."""
    import pyarrow.parquet as pq

    def values(t: pa.Table) -> pa.Table:
        cols = [
            c.cast(c.type.value_type) if pa.types.is_dictionary(c.type) else c for c in t.columns
        ]
        return pa.table(cols, names=t.column_names)

    differ = []
    for f in sorted(a.glob("*.parquet")):
        x, y = pq.read_table(f), pq.read_table(b / f.name)
        if not (x.schema.equals(y.schema) and values(x).equals(values(y))):
            differ.append(f.stem)
    return differ


def _in_parts(logs: Path, base: Path, count: int) -> list[tuple[str, dict]]:
    """The logs ingested in ``count`` parts, each read by two processes one after another,
    then put together into ``base/store-parts``: each step measured."""
    rows = []
    folders = [base / f"part-{k}" for k in range(1, count + 1)]
    for k, folder in enumerate(folders, 1):
        argv = ["ingest", str(logs), "--part", f"{k}/{count}", "-o", str(folder), "--workers", "2"]
        rows.append((f"iosweep ingest --part {k}/{count} --workers 2", measured(IOSWEEP, *argv)))
    store = base / "store-parts"
    shutil.rmtree(store, ignore_errors=True)
    argv = ["ingest", str(logs), "-o", str(store), "--force", "--from-parts", *map(str, folders)]
    name = f"iosweep ingest --from-parts (the {count} parts put together)"
    rows.append((name, measured(IOSWEEP, *argv)))
    for folder in folders:
        shutil.rmtree(folder, ignore_errors=True)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--logs", type=Path, help="a run directory of Darshan logs (else generated)")
    ap.add_argument("--files", type=int, default=1_281_000)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--keep", type=Path, help="keep the generated logs and stores here")
    ap.add_argument("--no-pydarshan", action="store_true")
    ap.add_argument("--no-merge", action="store_true")
    ap.add_argument("--parts", type=int, default=0, help="also ingest in N parts, put together")
    a = ap.parse_args()
    base = a.keep or Path(tempfile.mkdtemp(prefix="iosweep-bench-ingest-"))
    base.mkdir(parents=True, exist_ok=True)
    logs = a.logs
    if logs is None:
        from iosweep.testing.imagenet_trace import write_imagenet_logs

        logs = base / f"logs-{a.files}f-{a.epochs}e"
        if not (logs / "manifest.json").exists():  # written last
            print(f"writing the run's logs to {logs} ...", file=sys.stderr)
            write_imagenet_logs(logs, a.files, 32, 8, a.epochs)
    files = list(logs.rglob("*.darshan"))
    size = sum(f.stat().st_size for f in files)
    for f in files:  # in the page cache for every step: else the first reads them from disk
        f.read_bytes()
    rows: list[tuple[str, dict]] = []
    stores = {}
    for w in (1, 2):
        stores[w] = base / f"store-w{w}"
        shutil.rmtree(stores[w], ignore_errors=True)
        argv = ["ingest", str(logs), "-o", str(stores[w]), "--workers", str(w), "--force"]
        rows.append((f"iosweep ingest --workers {w}", measured(IOSWEEP, *argv)))
    differ = same_stores(stores[1], stores[2])
    inflate = measured(INFLATE, str(logs))
    rewrite_to = base / "rewrite"
    shutil.rmtree(rewrite_to, ignore_errors=True)
    rewrite_to.mkdir()
    rewrite = measured(REWRITE, str(stores[1]), str(rewrite_to))
    shutil.rmtree(rewrite_to, ignore_errors=True)
    floor = {"wall_s": inflate["wall_s"] + rewrite["wall_s"], "peak": 0, "rc": 0}
    rows += [
        ("floor (a): read + inflate every region", inflate),
        ("floor (b): write the store's tables again", rewrite),
        ("floor (a + b)", floor),
    ]
    if not a.no_pydarshan:
        rows.append(("PyDarshan DarshanReport(read_all=True)", measured(PYDARSHAN, str(logs))))
    if not a.no_merge:
        merge = measured(IOSWEEP, "merge", str(stores[1]))
        merge_floor = measured(MERGE_FLOOR, str(logs))
        rows += [
            ("iosweep merge (the merged log)", merge),
            ("its floor: inflate + deflate", merge_floor),
        ]
    if a.parts > 1:
        in_parts = _in_parts(logs, base, a.parts)
        rows += in_parts
        differ += [f"in parts: {t}" for t in same_stores(stores[1], base / "store-parts")]
    print(f"\n{len(files)} Darshan logs, {size / 1e6:,.0f} MB, in {logs}")
    print("| step | wall s | peak RSS GiB | x floor |\n|---|---:|---:|---:|")
    for name, r in rows:
        peak = f"{r['peak'] / GIB:.2f}" if r.get("peak") else "-"
        ratio = r["wall_s"] / floor["wall_s"] if floor["wall_s"] else float("nan")
        bad = "" if not r.get("rc") else f" (exit {r['rc']})"
        print(f"| {name}{bad} | {r['wall_s']:.1f} | {peak} | {ratio:.2f} |")
    one = rows[0][1]["wall_s"]
    print(f"\ningest (1 worker) / floor: {one / floor['wall_s']:.2f} (target <= 2)")
    if not a.no_pydarshan:
        py = next(r for n, r in rows if n.startswith("PyDarshan"))["wall_s"]
        print(f"PyDarshan read / iosweep ingest (1 worker): {py / one:.2f} (target >= 3)")
    if not a.no_merge:
        print(f"merge / its floor: {merge['wall_s'] / merge_floor['wall_s']:.2f}")
    if a.parts > 1:
        slowest = max(r["wall_s"] for n, r in in_parts if n.startswith("iosweep ingest --part"))
        together = in_parts[-1][1]["wall_s"]
        print(
            f"in {a.parts} parts on {a.parts} nodes (the slowest part + the put-together, "
            f"each measured above): {slowest + together:.1f} s against "
            f"{rows[1][1]['wall_s']:.1f} s in one job of two workers"
        )
    which = "1 and 2 workers" + (f", {a.parts} parts" if a.parts > 1 else "")
    print(f"stores of {which}: " + ("equal" if not differ else f"DIFFER in {differ}"))
    if not a.keep:
        shutil.rmtree(base, ignore_errors=True)
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())

"""Runs every C++ microbenchmark (build/bench/bench_*) and tabulates its counters.

Each binary writes google-benchmark's JSON to <out>/<binary>.json; the rows of all of
them are printed as one Markdown table (time per call, GFLOP/s, GB/s, rows/s, SIMD
level) and saved as <out>/cpp.md. Build first:

    cmake -S . -B build/bench -DSOFTKMEANS_BUILD_BENCHMARKS=ON -DCMAKE_BUILD_TYPE=Release
    cmake --build build/bench -j2
    python bench/cpp/run_all.py                        # the full sweep (tens of minutes)
    python bench/cpp/run_all.py --filter 'threads:2' --min-time 0.1
    python bench/cpp/run_all.py --sizes tiny --min-time 0.001   # smoke run, seconds
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys

COUNTERS = ("GFLOP/s", "GB/s", "rows/s")


def run_binary(path: str, out_dir: str, min_time: float, sizes: str, filt: str | None) -> list:
    name = os.path.basename(path)
    json_path = os.path.join(out_dir, f"{name}.json")
    cmd = [
        path,
        f"--sizes={sizes}",
        # A plain number of seconds: what google-benchmark 1.7 accepts and 1.8+ still does.
        f"--benchmark_min_time={min_time}",
        f"--benchmark_out={json_path}",
        "--benchmark_out_format=json",
    ]
    if filt:
        cmd.append(f"--benchmark_filter={filt}")
    print(f"# {' '.join(cmd)}", file=sys.stderr, flush=True)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    with open(json_path) as f:
        return json.load(f).get("benchmarks", [])


def _si(value: float) -> str:
    for div, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= div:
            return f"{value / div:.3g}{suffix}"
    return f"{value:.3g}"


def table(rows: list) -> str:
    lines = [
        "| benchmark | time/call | GFLOP/s | GB/s | rows/s | SIMD |",
        "| --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for b in rows:
        if b.get("error_occurred"):
            lines.append(f"| {b['name']} | skipped: {b.get('error_message', '')} | | | | |")
            continue
        unit = b.get("time_unit", "ns")
        t = f"{b['real_time']:.3g} {unit}"
        gf, gb, rs = (b.get(c, float("nan")) for c in COUNTERS)
        name = b["name"].removesuffix("/real_time")
        lines.append(f"| {name} | {t} | {gf:.3g} | {gb:.3g} | {_si(rs)} | {b.get('label', '')} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build-dir", default="build/bench")
    p.add_argument("--out", default=os.path.join("bench", "results"))
    p.add_argument("--min-time", type=float, default=0.2, help="seconds per benchmark")
    p.add_argument("--sizes", choices=["tiny", "default"], default="default")
    p.add_argument("--filter", help="google-benchmark --benchmark_filter regex")
    args = p.parse_args(argv)

    binaries = sorted(
        b for b in glob.glob(os.path.join(args.build_dir, "bench_*")) if os.access(b, os.X_OK)
    )
    if not binaries:
        print(f"no bench_* binaries in {args.build_dir}: build them first (see --help)")
        return 1
    os.makedirs(args.out, exist_ok=True)
    rows = []
    for path in binaries:
        rows += run_binary(path, args.out, args.min_time, args.sizes, args.filter)
    md = table(rows)
    print(md)
    with open(os.path.join(args.out, "cpp.md"), "w") as f:
        f.write(md + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

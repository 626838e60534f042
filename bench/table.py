"""The table that bench/compare.py prints: one `Row` per comparison (ours vs a named peer,
measured / needed), the data every row is built from, timing medians, the machine line
(CPU family/model, AVX-512 width, the same-run sgemm) and the CSV/JSON output. Shared by
compare_kernels.py and compare_fits.py."""

from __future__ import annotations

import csv
import dataclasses
import json
import os

import numpy as np
import peers as P

from softkmeans import _native


@dataclasses.dataclass
class Row:
    """One line of the table: ours vs a peer, times in seconds (or rates, see unit)."""

    comparison: str
    shape: tuple
    dtype: str
    ours: float
    peer: float
    unit: str  # "s" (lower is better) or "rows/s", "GFLOP/s" (higher is better)
    target: str  # human-readable target on `ratio`
    ratio: float  # the quantity the target constrains
    ok: bool
    note: str = ""


def blob_data(n, d, k, dtype, seed=0):
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=3.0, size=(k, d))
    X = (centres[rng.integers(0, k, size=n)] + rng.normal(size=(n, d))).astype(dtype)
    C = X[rng.choice(n, size=k, replace=False)].copy()
    return np.ascontiguousarray(X), np.ascontiguousarray(C)


def medians(cases, repeats):
    """The median seconds of each case of `peers.interleaved` (one warm-up; rests, bursts
    and round-robin order as there), in the order of `cases`."""
    return [t.median for t in P.interleaved(cases, repeats=repeats, warmup=1).values()]


def our_step(X, C, kind, sigma, threads):
    w = np.ones(X.shape[0])
    return lambda: _native.block_stats(X, C, kind, sigma, w, threads)


def format_row(r: Row) -> str:
    n, d, k = r.shape
    shape = f"n={n:>9,} d={d:>3} k={k:>4}"
    if r.unit == "s":
        vals = f"{r.ours * 1e3:10.1f} ms {r.peer * 1e3:10.1f} ms"
    else:
        vals = f"{r.ours:10.3g} {r.peer:10.3g} {r.unit}"
    flag = "ok" if r.ok else "MISS"
    return (f"| {r.comparison:<36} | {shape} | {r.dtype:<7} | {vals} | {r.ratio:7.2f} "
            f"| {r.target:<8} | {flag:<4} | {r.note}")  # fmt: skip


def write_results(rows, ceilings, info, args):
    """compare.csv (one line per row) and compare.json (rows, ceilings, build info)."""
    os.makedirs(args.out, exist_ok=True)
    records = []
    for r in rows:
        rec = dataclasses.asdict(r)
        rec["n"], rec["d"], rec["k"] = rec.pop("shape")
        records.append(rec)
    csv_path = os.path.join(args.out, "compare.csv")
    json_path = os.path.join(args.out, "compare.json")
    if records:
        with open(csv_path, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(records[0]))
            writer.writeheader()
            writer.writerows(records)
    meta = {"threads": args.threads, "quick": args.quick, "repeats": args.repeats}
    info = {key: (list(val) if isinstance(val, tuple) else val) for key, val in info.items()}
    with open(json_path, "w") as f:
        json.dump({"build_info": info, "run": meta, "ceilings": ceilings, "rows": records}, f,
                  indent=1)  # fmt: skip
    return [csv_path, json_path] if records else [json_path]


def _cpuinfo():
    fields = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if not line.strip():
                    break  # the first processor is enough
                key, _, value = line.partition(":")
                fields[key.strip()] = value.strip()
    except OSError:
        pass
    return fields


def avx512_width(vendor, family, flags):
    """How wide the AVX-512 datapaths are, from the CPU family where it is known: AMD Zen 4
    (family 25) runs a 512-bit operation as two 256-bit halves, Zen 5 (family 26) has
    full-width units (the desktop and server parts this project runs on); Intel parts with
    AVX-512 run it at full width."""
    if "avx512f" not in flags:
        return "no AVX-512"
    if vendor == "AuthenticAMD":
        return {25: "split (2 x 256-bit, Zen 4)", 26: "full 512-bit (Zen 5)"}.get(
            family, f"unknown (AMD family {family})"
        )
    return "full 512-bit" if vendor == "GenuineIntel" else "unknown"


def cpu_name():
    """The CPU as /proc/cpuinfo names it: model name (family, model), and the CPU count."""
    cpu = _cpuinfo()
    return (
        f"{cpu.get('model name', '?')} (family {cpu.get('cpu family', '?')}, model "
        f"{cpu.get('model', '?')}), {os.cpu_count()} CPUs"
    )


def load_average():
    """The 1, 5 and 15 minute load averages, as one string ("n/a" where unknown)."""
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def machine_line(sgemm_gflops, n_threads, sgemm_size=4096):
    """One line naming the machine: CPU model, family/model, the AVX-512 width and the
    extensions the kernels may use, the SIMD level selected, the same-run sgemm (a
    sgemm_size^3 float32 product) and the load average now. Every benchmark prints it."""
    import softkmeans

    cpu = _cpuinfo()
    flags = set(cpu.get("flags", "").split())
    family = int(cpu.get("cpu family", "0") or 0)
    vendor = cpu.get("vendor_id", "?")
    extensions = [f for f in ("avx2", "fma", "avx512f", "avx512_bf16", "amx_bf16") if f in flags]
    level = softkmeans.build_info().get("simd_selected", "?")
    return (
        f"# machine: {cpu_name()}, AVX-512: {avx512_width(vendor, family, flags)}; flags "
        f"{' '.join(extensions)}; SIMD level {level}; same-run sgemm {sgemm_size}^3 float32 "
        f"{sgemm_gflops:.0f} GFLOP/s at {n_threads} threads (numpy/{_blas_name()}); load "
        f"average {load_average()}"
    )


def _blas_name():
    """numpy's BLAS (the same-run sgemm's) and its kernels: faiss-cpu and scipy bring
    their own OpenBLAS (faiss's reports Barcelona here), listed first when loaded first."""
    try:
        from threadpoolctl import threadpool_info

        blas = [lib for lib in threadpool_info() if lib.get("user_api") == "blas"]
        blas.sort(key=lambda lib: "numpy" not in os.path.basename(os.path.dirname(lib["filepath"])))
        if blas:
            return f"{blas[0].get('internal_api')} {blas[0].get('architecture', '')}".strip()
    except ImportError:
        pass
    return "BLAS"

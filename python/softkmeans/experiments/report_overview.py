"""The report's reader's view: one row per data set of the quantities the paper states,
and the figures that compare data sets (every number is read back from the rows)."""

from __future__ import annotations

import math
import pathlib
import re

from ._common import PASS, pyplot

HEAD = [
    "data set",
    "sigma_c",
    "Delta_min (claim 5, C*)",
    "slope / -Delta_min (claim 5)",
    "sigma* = sqrt(Delta_min)/2",
    "slope / -Delta* (claim 8)",
    "sigma_part / sigma_cond (claim 7)",
]


def _pick(rows, claim, name, start, where=None):
    """The row of the largest k whose quantity starts with `start` (and contains where);
    the constructed cases that claims 7 and 8 attach to a host data set are not its own."""
    mine = [
        r
        for r in rows
        if r.claim == claim
        and r.dataset == name
        and "constructed" not in r.quantity + r.note
        and r.quantity.startswith(start)
        and (where is None or where in r.quantity)
        and r.status == PASS
    ]
    return max(mine, key=lambda r: r.k) if mine else None


def _sigma_c(rows, name):
    r = _pick(rows, 3, name, "critical sigma measured")
    return r.predicted if r else math.nan


def per_dataset(rows, names):
    """name -> dict of the overview's numbers (nan where the rows have none)."""
    out = {}
    for name in names:
        c5 = _pick(rows, 5, name, "oracle: slope", "Lloyd fixed point")
        c8 = _pick(rows, 8, name, "oracle: slope")
        c7 = _pick(rows, 7, name, "oracle: softmax keeps")
        dmin = -c5.predicted if c5 else math.nan
        out[name] = {
            "k5": c5.k if c5 else None,
            "sigma_c": _sigma_c(rows, name),
            "delta_min": dmin,
            "slope5": c5.measured / c5.predicted if c5 else math.nan,
            "sigma_star": math.sqrt(dmin) / 2 if dmin == dmin and dmin > 0 else math.nan,
            "slope8": c8.measured / c8.predicted if c8 else math.nan,
            "k8": c8.k if c8 else None,
            "ratio7": c7.measured / c7.predicted if c7 and c7.predicted else math.nan,
            "k7": c7.k if c7 else None,
        }
    return out


def lines(rows, names, fmt, table):
    """The overview table's markdown lines."""
    data = per_dataset(rows, names)
    body = []
    for name in names:
        d = data[name]
        body.append(
            [
                name,
                fmt(d["sigma_c"]),
                fmt(d["delta_min"]) + (f" (k={d['k5']})" if d["k5"] else ""),
                fmt(d["slope5"]),
                fmt(d["sigma_star"]),
                fmt(d["slope8"]) + (f" (k={d['k8']})" if d["k8"] else ""),
                fmt(d["ratio7"]) + (f" (k={d['k7']})" if d["k7"] else ""),
            ]
        )
    intro = (
        "One row per data set, the largest k with a PASS row of each claim (the other k are "
        "in the claims' tables): sigma_c = sqrt(lambda_max); Delta_min at Lloyd's fixed point "
        "C* and the fitted log-slope of the softmax step's error over -Delta_min (claim 5: "
        ">= 0.9 passes, the O(.) bound); sigma*, where entmax15 leaves Lloyd's step (claim 6); "
        "the same slope for the softmax fixed point's distance to C* (claim 8); the largest "
        "sigma keeping Lloyd's partition over the certified sigma_cond (claim 7: >= 1)."
    )
    return ["## Overview per data set", "", intro, "", *table(HEAD, body), ""]


def _draw_rates(ax, x, shown):
    """Claims 5 and 8's fitted rates against the predicted one; shown: per_dataset's
    entries, one per x."""
    ax.plot(x, [s["slope5"] for s in shown], "o", label="claim 5: softmax step")
    ax.plot(x, [s["slope8"] for s in shown], "s", mfc="none", label="claim 8: C_sigma")
    ax.axhline(1.0, color="k", lw=0.8, label="predicted rate")
    ax.axhline(0.9, color="r", lw=0.8, ls=":", label="pass threshold (O(.) bound)")


def _draw_claim7(ax, x, shown):
    """Claim 7's sigma_part / sigma_cond (log scale) against 1."""
    ax.semilogy(x, [s["ratio7"] for s in shown], "o")
    ax.axhline(1.0, color="k", lw=0.8, label="sigma_part = sigma_cond")


# The overview figures: (file name, the value a data set needs (not nan) to be shown,
# draw(ax, x, entries), y label, title).
OVERVIEWS = (
    ("overview_slopes.png", "slope5", _draw_rates,
     "fitted log-slope / (-Delta)  (dimensionless)",
     "Rates across data sets (largest k, C = Lloyd's fixed point)"),
    ("overview_claim7.png", "ratio7", _draw_claim7,
     "sigma_part / sigma_cond  (dimensionless)",
     "Claim 7: how much hotter than certified the partition survives"),
)  # fmt: skip


def figures(out_dir, rows, names):
    """figures/overview_slopes.png and figures/overview_claim7.png; the paths written."""
    plt = pyplot()
    if plt is None or out_dir is None:
        return []
    folder = pathlib.Path(out_dir) / "figures"
    folder.mkdir(parents=True, exist_ok=True)
    data = per_dataset(rows, names)
    written = []
    for file_name, key, draw, ylabel, title in OVERVIEWS:
        shown = [n for n in names if data[n][key] == data[n][key]]  # not nan
        if not shown:
            continue
        fig, ax = plt.subplots(figsize=(max(6.0, 0.32 * len(shown) + 2), 4.2))
        x = range(len(shown))
        draw(ax, x, [data[n] for n in shown])
        ax.set_xticks(list(x), shown, rotation=70, fontsize=7)
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.legend(fontsize=7)
        fig.tight_layout()
        path = folder / file_name
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written


LINK = re.compile(r"\]\((figures/[^)]+)\)")


def prune_figures(out_dir, keep):
    """Delete the figures of out_dir whose name contains none of `keep` (data set names or
    'overview'), and drop report.md's lines that link to a deleted figure: a committed copy
    of a run then links only to figures it has."""
    out_dir = pathlib.Path(out_dir)
    for path in (out_dir / "figures").glob("*.png"):
        if not any(path.stem.endswith("_" + k) or path.stem.startswith(k) for k in keep):
            path.unlink()
    report = out_dir / "report.md"
    kept = []
    for line in report.read_text(encoding="utf-8").splitlines():
        links = LINK.findall(line)
        if links and not all((out_dir / link).is_file() for link in links):
            continue
        kept.append(line)
    report.write_text("\n".join(kept) + "\n", encoding="utf-8")

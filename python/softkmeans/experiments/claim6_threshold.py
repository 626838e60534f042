"""Claim 6: the entmax15 responsibilities are one-hot exactly when Delta_i >= 4 sigma^2.

SPEC.md ("Margins and temperatures", Exact recovery). Every verdict is the oracle's
(`softkmeans.experiments.oracle`: float64 distances from differences, entmax15 by the
full sort of all k scores with no candidate filter, checked against bisection on tau),
at two centroid sets per data set and k (the k-means++ init and Lloyd's fixed point,
both computed by the oracle), with sigma* = sqrt(Delta_min) / 2:

- at 0.999 sigma*: every row of r is one-hot on Lloyd's label (so the entmax15 step is
  Lloyd's step, bit for bit, in the oracle's float64);
- at 1.001 sigma*: the rows that are not one-hot are exactly {i : Delta_i < 4 sigma^2}
  (the minimum-margin point among them), and where a row's support has two entries its
  runner-up weight equals the closed form ((sqrt(8 - g^2) - g) / 4)^2, g = Delta_i /
  (2 sigma^2), to 1e-12 (derivation: with u = z / 2 and a = u_1 - tau, the support of two
  solves a^2 + (a - g/2)^2 = 1).

The native core's agreement is two separate rows, labelled "implementation check": in
float64 its entmax15 step below sigma* returns the bits of its hard step (SPEC.md's
guarantee) and its steps at 0.999 and 1.001 sigma* match the oracle's to 1e-10 relative;
in float32 (its own row) its entmax15 step below its own float32 sigma* returns the bits
of its float32 hard step. The float32 row needs the library's float32 distance error,
measured against the exact distances of the float32 inputs, below the slack 0.2% of
Delta_min between 0.999 sigma* and sigma* (4 x the measured error: two distances per
margin, two margins); where it is not, the row says "hypothesis not met" with the
numbers.
"""

from __future__ import annotations

import numpy as np

import softkmeans as sk

from . import oracle as O
from ._common import FAIL, NOT_MET, PASS, Row, pyplot
from .claim5_rate import initial_centroids, margin_floor, no_margin_note, subsample

NUMBER = 6
TITLE = "Sharp entmax15 threshold"

BELOW, ABOVE = 0.999, 1.001
FOUR = 4.0  # the threshold's constant: one-hot exactly when Delta_i >= FOUR sigma^2
RUNNER_UP_ATOL = 1e-12  # closed form vs oracle (weights ~1e-6 near the threshold)
IMPL_RTOL = 1e-10  # SPEC.md float64 parity


def closed_form(gap):
    """The runner-up weight of a two-entry support (see the module docstring)."""
    return O.entmax15_runner_up(gap)


def threshold_check(X, C):
    """The oracle's measurements at one (X, C) in float64, as a dict."""
    X = np.asarray(X, dtype=np.float64)
    C = np.asarray(C, dtype=np.float64)
    D = O.sq_distances(X, C)
    m = O.margins(D)
    dmin = float(m.min())
    out = {"delta_min": dmin, "margin_floor": margin_floor(X, C), "n": X.shape[0]}
    if no_margin_note(dmin, out["margin_floor"]):
        return out
    s_star = float(np.sqrt(dmin / FOUR))
    lo, hi = BELOW * s_star, ABOVE * s_star
    out.update(sigma_star=s_star, lo=lo, hi=hi)
    lab = O.labels(D)
    r_lo = O.entmax15(O.scores(D, lo))
    on_label = r_lo[np.arange(len(lab)), lab] == 1.0
    out["below_off"] = int(np.count_nonzero((np.count_nonzero(r_lo, axis=1) != 1) | ~on_label))
    r_hi = O.entmax15(O.scores(D, hi))
    r_bis = O.entmax15_bisect(O.scores(D, hi))
    support = np.count_nonzero(r_hi, axis=1)
    out["left"] = np.flatnonzero(support > 1)
    out["expected"] = np.flatnonzero(m < FOUR * hi * hi)
    out["argmin"] = int(np.argmin(m))
    out["argmin_support"] = int(support[out["argmin"]])
    out["margin_ratio"] = m[out["left"]] / dmin if out["left"].size else np.array([])
    out["sort_vs_bisect"] = float(np.abs(r_hi - r_bis).max())
    two = np.flatnonzero(support == 2)
    out["n_two"] = int(two.size)
    if two.size:
        second = np.sort(r_hi[two], axis=1)[:, -2]
        out["runner_up_err"] = float(np.abs(second - closed_form(m[two] / (2.0 * hi * hi))).max())
        out["runner_up_max"] = float(second.max())
    return out


def _bits_differ(X, C, sigma):
    """Entries in which the native entmax15 step at sigma differs from its hard step."""
    hard = sk.centroid_step(X, C, kind="hard")
    ent = sk.centroid_step(X, C, sigma, kind="entmax15")
    n = int(np.count_nonzero(ent.centroids != hard.centroids))
    n += int(np.count_nonzero(ent.cluster_weights != hard.cluster_weights))
    return n + int(ent.objective != hard.objective)


def implementation_check(X, C, res):
    """The native core in float64 against SPEC.md and the oracle: (problems, note)."""
    problems, parts = [], []
    X64, C64 = np.asarray(X, dtype=np.float64), np.asarray(C, dtype=np.float64)
    for name, s in (("0.999", res["lo"]), ("1.001", res["hi"])):
        got = sk.centroid_step(X64, C64, s, kind="entmax15").centroids
        want = O.step(X64, C64, s, kind="entmax15")[0]
        rel = float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-300))
        parts.append(f"float64 step vs oracle at {name} sigma*: {rel:.2g}")
        if rel > IMPL_RTOL:
            problems.append(f"float64 step at {name} sigma* off the oracle by {rel:.2g}")
    n = _bits_differ(X64, C64, res["lo"])
    parts.append(f"float64: {n} entries of the entmax15 step != hard step below sigma*")
    if n:
        problems.append(f"float64 entmax15 step differs from the hard step in {n} entries")
    return problems, "; ".join(parts)


def float32_check(X, C):
    """The native float32 entmax15 step below its own float32 sigma* against its float32
    hard step: (status, entries that differ, note)."""
    X32, C32 = np.asarray(X, dtype=np.float32), np.asarray(C, dtype=np.float32)
    exact = O.sq_distances(X32, C32)  # float64 distances of the float32 inputs
    err = float(np.abs(sk.sq_distances(X32, C32).astype(np.float64) - exact).max())
    m32 = float(np.min(sk.margins(X32, C32)))
    slack = (1.0 - BELOW**2) * m32
    head = f"library's float32 distance error {err:.3g}; float32 Delta_min {m32:.6g}"
    if not slack > 4.0 * err:
        why = f"{head}: the 0.2% slack {slack:.3g} <= 4 x the error, not checked"
        return NOT_MET, float("nan"), why
    n = _bits_differ(X32, C32, BELOW * float(np.sqrt(m32 / FOUR)))
    return PASS if n == 0 else FAIL, float(n), f"{head}; {n} entries differ"


def _rows(ds_name, k, where, res, extra, impl=None, f32=None):
    """The rows of one C (`where` names it): one-hot below sigma*, the set leaving one-hot
    above it, the runner-up weight, and the implementation checks given (impl, f32)."""
    tag = f"C = {where}"
    q_below = f"oracle: rows of entmax15 not one-hot on Lloyd's label at {BELOW} sigma* ({tag})"
    q_above = f"oracle: rows leaving one-hot at {ABOVE} sigma* vs {{Delta_i < 4 sigma^2}} ({tag})"
    q_runner = f"oracle: |runner-up weight - ((sqrt(8 - g^2) - g)/4)^2| at {ABOVE} sigma* ({tag})"
    q_impl = f"implementation check: native entmax15 step vs hard step and oracle ({tag})"
    q_f32 = f"implementation check: float32 entmax15 step == hard step below sigma* ({tag})"
    nan = float("nan")
    why = no_margin_note(res["delta_min"], res["margin_floor"])
    if why:
        return [
            Row(NUMBER, ds_name, k, q, nan, nan, NOT_MET, why + extra)
            for q in (q_below, q_above, q_runner, q_impl, *([q_f32] if f32 else []))
        ]
    head = f"Delta_min={res['delta_min']:.6g}, sigma*={res['sigma_star']:.6g}"
    n_below = res["below_off"]
    below = Row(
        NUMBER, ds_name, k, q_below, float(n_below), 0.0, PASS if n_below == 0 else FAIL,
        f"{head}; full sort of all {k} scores, no candidate filter" + extra,
    )  # fmt: skip
    above = Row(NUMBER, ds_name, k, q_above, *_leaving_one_hot(res, head, extra))
    runner = Row(NUMBER, ds_name, k, q_runner, *_runner_up(res, head, extra))
    rows = [below, above, runner]
    if impl is not None:
        problems, impl_note = impl
        rows.append(
            Row(
                NUMBER,
                ds_name,
                k,
                q_impl,
                float(len(problems)),
                0.0,
                FAIL if problems else PASS,
                f"{head}; {impl_note}" + extra,
            )  # fmt: skip
        )
    if f32 is not None:
        status, n, note = f32
        rows.append(Row(NUMBER, ds_name, k, q_f32, n, 0.0, status, note + extra))
    return rows


def _leaving_one_hot(res, head, extra):
    """(measured, predicted, status, note) of the rows leaving one-hot at ABOVE sigma*:
    exactly {i : Delta_i < 4 sigma^2}, the minimum-margin point among them, and the sort
    agreeing with bisection."""
    left, expected = res["left"], res["expected"]
    same_set = np.array_equal(left, expected)
    has_argmin = res["argmin"] in set(left.tolist())
    ok = same_set and has_argmin and res["sort_vs_bisect"] <= 1e-12
    shown = ", ".join(
        f"{i} (Delta_i = {r:.5f} Delta_min)" for i, r in zip(left[:5], res["margin_ratio"][:5])
    )
    if left.size > 5:
        shown += f", ... ({left.size} in all)"
    note = (
        f"{head}; leaving one-hot: {shown or 'none'}; minimum-margin point {res['argmin']} "
        f"{'among them' if has_argmin else 'NOT among them'}; sort vs bisection "
        f"{res['sort_vs_bisect']:.1e}"
    )
    if not same_set:
        note += f"; expected the points {expected[:10].tolist()} (Delta_i < 4 sigma^2)"
    return float(left.size), float(expected.size), PASS if ok else FAIL, note + extra


def _runner_up(res, head, extra):
    """(measured, predicted, status, note) of the runner-up weight's closed form, read on
    the rows with two entries in their support."""
    nan = float("nan")
    if res["n_two"]:
        err = res["runner_up_err"]
        return (
            err, RUNNER_UP_ATOL, PASS if err <= RUNNER_UP_ATOL else FAIL,
            f"{head}; {res['n_two']} rows with two entries, largest runner-up weight "
            f"{res['runner_up_max']:.3g}" + extra,
        )  # fmt: skip
    if res["argmin_support"] < 2:
        # The theory puts the minimum-margin point's runner-up in the support above sigma*.
        return (
            nan, RUNNER_UP_ATOL, FAIL,
            f"{head}; no row with two entries: the minimum-margin point stays one-hot at "
            f"{ABOVE} sigma*" + extra,
        )  # fmt: skip
    return (
        nan, RUNNER_UP_ATOL, NOT_MET,
        f"{head}; no row with exactly two entries in its support (the minimum-margin "
        f"point has {res['argmin_support']}: a near-tie of three centroids)" + extra,
    )  # fmt: skip


def _figure(ds, X, fixed_points, ctx):
    """The oracle's largest off-label weight against sigma / sigma* at each k's Lloyd fixed
    point: entmax15 (with the closed form of the minimum-margin point), which ends at
    sigma*, and softmax, whose tail is exponential and never ends."""
    plt = pyplot()
    path = ctx.figure_path(f"claim6_threshold_{ds.name}")
    if plt is None or path is None or not fixed_points:
        return
    grid = np.geomspace(0.5, 2.0, 61)
    ratios = np.unique(np.concatenate([grid, [BELOW, ABOVE, 1.0]]))
    zero = 1e-20  # where exact zeros are drawn on the log axis
    fig, ax = plt.subplots(figsize=(8, 4.8))
    for i, (k, C) in enumerate(fixed_points):
        D = O.sq_distances(X, C)
        dmin = float(O.margins(D).min())
        if no_margin_note(dmin, margin_floor(X, C)):
            continue
        s_star = np.sqrt(dmin / FOUR)
        ent = np.array([1.0 - O.entmax15(O.scores(D, q * s_star)).max(axis=1).min()
                        for q in ratios])  # fmt: skip
        soft = np.array([1.0 - O.softmax(D, q * s_star).max(axis=1).min() for q in ratios])
        ax.semilogy(ratios, np.where(ent > 0, ent, zero), "o", color=f"C{i}", ms=3,
                    label=f"k={k}: entmax15 (oracle, full sort)")  # fmt: skip
        ax.semilogy(ratios, np.maximum(closed_form(2.0 / ratios**2), zero), "-", color=f"C{i}",
                    lw=1, alpha=0.6, label=f"k={k}: ((sqrt(8 - g^2) - g)/4)^2")  # fmt: skip
        ax.semilogy(ratios, np.maximum(soft, zero), "--", color=f"C{i}", lw=1,
                    label=f"k={k}: softmax (oracle)")  # fmt: skip
    ax.axvline(1.0, color="k", ls=":", lw=1, label="sigma* = sqrt(Delta_min)/2")
    ax.text(0.52, zero * 3, "exactly 0 (one-hot)", fontsize=8, color="gray")
    ax.set_xscale("log")
    ax.set_ylim(zero / 3, 1.0)
    ax.set_xlabel("sigma / sigma*  (dimensionless)")
    ax.set_ylabel("largest off-label weight 1 - max_j r_ij  (dimensionless)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=6, loc="lower right")
    ax.set_title(
        f"Claim 6, {ds.name}: entmax15's tail is polynomial and ends at sigma*; "
        "softmax's is exponential (C = Lloyd fixed point)",
        fontsize=9,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run(ds, ks, ctx):
    """Rows per k and C: the oracle's one-hot set below and above sigma*, the runner-up
    weight's closed form, and the native core's implementation check."""
    X, sub_note = subsample(ds, ctx, 5000 if ctx.quick else 20000)
    rows, fixed_points = [], []
    for k in ks:
        if k < 2 or k > X.shape[0]:
            continue
        C0 = np.asarray(initial_centroids(X, k, ctx, ds.name), dtype=np.float64)
        path, converged = O.lloyd(X, C0, 100 if ctx.quick else 300)
        fixed_points.append((k, path[-1]))
        lloyd_note = f"Lloyd: {len(path) - 1} steps" + ("" if converged else " (not converged)")
        extra = "; " + "; ".join(s for s in (lloyd_note, sub_note) if s)
        for where, C in (("k-means++ init", C0), ("Lloyd fixed point", path[-1])):
            res = threshold_check(X, C)
            impl = implementation_check(X, C, res) if "lo" in res else None
            rows += _rows(ds.name, k, where, res, extra, impl, float32_check(X, C))
    _figure(ds, X, fixed_points, ctx)
    return rows

"""Claim 6: the entmax15 step equals Lloyd's step exactly below sigma* = sqrt(Delta_min) / 2.

SPEC.md ("Margins and temperatures", Exact recovery): the entmax15 responsibilities of
point i are one-hot exactly when Delta_i >= 4 sigma^2, so for sigma <= sqrt(Delta_min) / 2
the entmax15 step is Lloyd's step, and the native core returns its bits (centroids,
cluster weights N, objective = J) for both dtypes. Just above, the points with
Delta_i < 4 sigma^2, the minimum-margin point first, leave one-hot and the step moves.

Checked per data set, k, dtype (float64 and float32: X and C cast, Delta_min taken from
`margins` on the cast arrays, i.e. what the core sees) and C (the k-means++ initial
centroids and the Lloyd fixed point reached from them):

- at sigma = 0.999 sigma*: the entmax15 step equals the hard step bit for bit
  (np.array_equal on centroids and cluster weights, == on the objective);
- at sigma = 1.001 sigma*: the step differs from Lloyd's, and the points whose entmax15
  responsibilities are not one-hot are exactly those with Delta_i < 4 sigma^2, which
  include the minimum-margin point.

The factors 0.999 / 1.001 move 4 sigma^2 by 0.2% of Delta_min, far more than the float32
rounding of the margins (~1e-7 relative to ||x||^2 + ||c||^2, and Delta_min must exceed
64 eps times that to count as a margin at all).
"""

from __future__ import annotations

import numpy as np

import softkmeans as sk

from ._common import Row, pyplot
from .claim5_rate import initial_centroids, lloyd_path, margin_floor, no_margin_note, subsample

NUMBER = 6
TITLE = "Sharp entmax15 threshold"

BELOW, ABOVE = 0.999, 1.001
DTYPES = (np.float64, np.float32)


def step_difference(X, C, sigma):
    """(number of differing entries, max |centroid difference|) of the entmax15 step at
    sigma against the hard step; entries are the centroids, the cluster weights and the
    objective (G_sigma against J)."""
    hard = sk.centroid_step(X, C, kind="hard")
    ent = sk.centroid_step(X, C, sigma, kind="entmax15")
    count = int(np.count_nonzero(ent.centroids != hard.centroids))
    count += int(np.count_nonzero(ent.cluster_weights != hard.cluster_weights))
    count += int(ent.objective != hard.objective)
    delta = np.abs(ent.centroids.astype(np.float64) - hard.centroids.astype(np.float64))
    return count, float(delta.max())


def one_hot_diagnosis(X, C, sigma):
    """Why an entmax15 step below the threshold differs from Lloyd's: "" or a sentence.

    When every entmax15 row is one-hot on Lloyd's label and the cluster weights agree,
    the responsibilities are exactly Lloyd's and a difference in the last bits of the
    centroids can only come from summing the same terms in another order.
    """
    r = sk.responsibilities(X, C, sigma, kind="entmax15")
    labels, _ = sk.assign(X, C)
    one_hot = bool(np.all(np.count_nonzero(r, axis=1) == 1))
    same = one_hot and np.array_equal(np.argmax(r, axis=1), labels)
    hard = sk.centroid_step(X, C, kind="hard")
    ent = sk.centroid_step(X, C, sigma, kind="entmax15")
    scale = np.spacing(np.abs(hard.centroids).max())
    ulps = float(np.abs(ent.centroids - hard.centroids).max() / scale)
    if same and np.array_equal(ent.cluster_weights, hard.cluster_weights):
        return (
            "every entmax15 row is one-hot on Lloyd's label and N agrees, yet the centroids "
            f"differ by up to {ulps:.0f} ulp: the native entmax15 and hard steps sum in "
            "different orders (a core bug against SPEC.md's bit-for-bit guarantee)"
        )
    return f"responsibilities one-hot on Lloyd's labels: {same}"


def threshold_check(X, C):
    """The measurements of the claim at one (X, C) in X's dtype, as a dict."""
    m = sk.margins(X, C).astype(np.float64)
    dmin = float(m.min())
    out = {"delta_min": dmin, "margin_floor": margin_floor(X, C), "n": X.shape[0]}
    if no_margin_note(dmin, out["margin_floor"]):
        return out
    s_star = float(np.sqrt(dmin) / 2.0)
    lo, hi = BELOW * s_star, ABOVE * s_star
    out["sigma_star"] = s_star
    out["below"] = step_difference(X, C, lo)
    out["below_diagnosis"] = one_hot_diagnosis(X, C, lo) if out["below"][0] else ""
    out["above"] = step_difference(X, C, hi)
    r = sk.responsibilities(X, C, hi, kind="entmax15")
    out["left"] = np.flatnonzero(np.count_nonzero(r, axis=1) > 1)
    out["expected"] = np.flatnonzero(m < 4.0 * hi * hi)
    out["argmin"] = int(np.argmin(m))
    out["margin_ratio"] = m[out["left"]] / dmin if out["left"].size else np.array([])
    return out


def _rows(ds_name, k, where, dtype, res, extra):
    tag = f"{np.dtype(dtype).name}, C = {where}"
    q_below = f"entries of entmax15 step != Lloyd step at sigma = {BELOW} sqrt(Delta_min)/2 ({tag})"
    q_above = (
        f"points leaving one-hot at sigma = {ABOVE} sqrt(Delta_min)/2 vs points with "
        f"Delta_i < 4 sigma^2 ({tag})"
    )
    why = no_margin_note(res["delta_min"], res["margin_floor"])
    if why:
        nan = float("nan")
        return [
            Row(NUMBER, ds_name, k, q_below, nan, 0.0, "hypothesis not met", why + extra),
            Row(NUMBER, ds_name, k, q_above, nan, nan, "hypothesis not met", why + extra),
        ]
    head = f"Delta_min={res['delta_min']:.6g}, sigma*={res['sigma_star']:.6g}"
    n_below, d_below = res["below"]
    below = Row(
        NUMBER,
        ds_name,
        k,
        q_below,
        float(n_below),
        0.0,
        "PASS" if n_below == 0 else "FAIL",
        f"{head}; max |centroid difference| {d_below:.3g}"
        + (f"; {res['below_diagnosis']}" if res.get("below_diagnosis") else "")
        + extra,
    )
    n_above, d_above = res["above"]
    left, expected = res["left"], res["expected"]
    same_set = np.array_equal(left, expected)
    has_argmin = res["argmin"] in set(left.tolist())
    ok = n_above > 0 and same_set and has_argmin
    shown = ", ".join(
        f"{i} (Delta_i = {r:.5f} Delta_min)" for i, r in zip(left[:5], res["margin_ratio"][:5])
    )
    if left.size > 5:
        shown += f", ... ({left.size} in all)"
    note = (
        f"{head}; step: {n_above} entries differ from Lloyd's (max |centroid difference| "
        f"{d_above:.3g}); leaving one-hot: {shown or 'none'}; minimum-margin point "
        f"{res['argmin']} {'among them' if has_argmin else 'NOT among them'}"
    )
    if not same_set:
        note += f"; expected the points {expected[:10].tolist()} (Delta_i < 4 sigma^2)"
    above = Row(
        NUMBER,
        ds_name,
        k,
        q_above,
        float(left.size),
        float(expected.size),
        "PASS" if ok else "FAIL",
        note + extra,
    )
    return [below, above]


def _figure(ds, X, fixed_points, ctx):
    """Step difference against sigma / sigma* at each k's Lloyd fixed point, both dtypes."""
    plt = pyplot()
    path = ctx.figure_path(f"claim6_threshold_{ds.name}")
    if plt is None or path is None or not fixed_points:
        return
    ratios = np.unique(np.concatenate([np.linspace(0.95, 1.05, 41), [BELOW, ABOVE, 1.0]]))
    zero = 1e-20  # where exact zeros are drawn on the log axis
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    for ax, dtype in zip(axes, DTYPES):
        Xd = X.astype(dtype)
        for i, (k, C) in enumerate(fixed_points):
            Cd = C.astype(dtype)
            dmin = float(sk.margins(Xd, Cd).astype(np.float64).min())
            if no_margin_note(dmin, margin_floor(Xd, Cd)):
                continue
            s_star = np.sqrt(dmin) / 2.0
            diffs = np.array([step_difference(Xd, Cd, q * s_star)[1] for q in ratios])
            ax.semilogy(
                ratios, np.where(diffs > 0, diffs, zero), ".-", color=f"C{i}", label=f"k={k}"
            )
        ax.axhline(zero, color="gray", ls=":", lw=1)
        ax.axvline(1.0, color="k", ls="--", lw=1, label="sigma* = sqrt(Delta_min)/2")
        ax.text(0.951, zero * 3, "exactly 0 (bit for bit)", fontsize=8, color="gray")
        ax.set_title(f"{np.dtype(dtype).name}")
        ax.set_xlabel("sigma / sigma*  (dimensionless)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8, loc="upper left")
    axes[0].set_ylabel("max |entmax15 step - Lloyd step|  (data units)")
    fig.suptitle(
        f"Claim 6, {ds.name}: the entmax15 step leaves Lloyd's exactly at sigma* "
        "(C = Lloyd fixed point)"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run(ds, ks, ctx):
    """Rows: per k, C and dtype, the bitwise check below sigma* and the departure above."""
    X, sub_note = subsample(ds, ctx, 5000 if ctx.quick else 50000)
    rows, fixed_points = [], []
    for k in ks:
        if k < 2 or k > X.shape[0]:
            continue
        C0 = initial_centroids(X, k, ctx, ds.name)
        path, converged = lloyd_path(X, C0, 100 if ctx.quick else 300)
        fixed_points.append((k, path[-1]))
        lloyd_note = f"Lloyd: {len(path) - 1} steps" + ("" if converged else " (not converged)")
        extra = "; " + "; ".join(s for s in (lloyd_note, sub_note) if s)
        for where, C in (("k-means++ init", C0), ("Lloyd fixed point", path[-1])):
            for dtype in DTYPES:
                res = threshold_check(X.astype(dtype), C.astype(dtype))
                rows += _rows(ds.name, k, where, dtype, res, extra)
    _figure(ds, X, fixed_points, ctx)
    return rows

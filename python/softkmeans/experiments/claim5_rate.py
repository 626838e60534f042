"""Claim 5: the softmax step approaches Lloyd's step at the rate exp(-Delta_min / (2 sigma^2)).

SPEC.md ("Margins and temperatures", Rate): each wrong softmax responsibility of point i
is at most exp(-Delta_i / (2 sigma^2)), so
||step_softmax(C) - step_hard(C)|| = O((k - 1) exp(-Delta_min / (2 sigma^2))).
At a fixed C with Delta_min > 0 the error is a sum of exponentials exp(-Delta_i x),
x = 1 / (2 sigma^2); its log-slope in x tends to -Delta_min as x -> infinity.

What is measured, per data set and k, at two fixed C (the k-means++ initial centroids and
the Lloyd fixed point reached from them): err(x) = ||step_softmax(C) - step_hard(C)||_F on
a grid of x, and the least-squares slope of log err against x over the coldest four
decades above float64 rounding of the step (the window where the asymptotics is closest
and the error is still measurable). The slope is compared with -Delta_min. Every number
a verdict uses is the oracle's (`softkmeans.experiments.oracle`: float64 distances from
differences, softmax by scipy's logsumexp, both steps as sum_i r_ij x_i / N_j); the
native core's agreement with it is a separate "implementation check" row.

The claim is an upper bound, O(exp(-Delta_min / (2 sigma^2))): a fitted slope at least
as steep as -Delta_min (to SLOPE_RTOL) passes, a shallower one fails. A slope steeper
than -Delta_min is what competing points with margins just above Delta_min give at a
finite sigma; the note says so and gives the first-order model's slope (below).
One row (an identity, on the data set IDENTITY_HOST only) checks the per-entry bound the
rate rests on, on the whole grid:
r_ij <= exp(-Delta_i / (2 sigma^2)) for every j != a_i (r_ij = exp(-(D_ij - D_i(1)) /
(2 sigma^2)) / sum_l exp(...) <= exp(-(D_ij - D_i(1)) / (2 sigma^2)), and D_ij - D_i(1)
>= Delta_i).

The statement is asymptotic. On real data many points can have margins within a few
percent of Delta_min; the local slope at a finite x is then the weighted mean of their
margins, not Delta_min. To tell that apart from a wrong step, the first-order model of
the error, E1(x) = the step change caused by leaking mass exp(-(D_ij - D_i,min) x) of
every point to every other centroid (computed from the distances alone, no softmax
step), is fitted over the same window. A slope off -Delta_min that the model reproduces
is reported as "hypothesis not met" (the asymptotic regime lies below float64 rounding),
with the numbers; a slope that the model does not reproduce is a FAIL.

This module also holds the helpers the claims 6-8 share (seeded subsampling, k-means++
initial centroids, the Lloyd path, the log-slope fit).
"""

from __future__ import annotations

import numpy as np

import softkmeans as sk

from . import oracle as O
from ._common import FAIL, IDENTITY, IDENTITY_HOST, NOT_MET, PASS, Row, pyplot

NUMBER = 5
TITLE = "Rate of the softmax step"

# The step difference is measured down to this multiple of float64 rounding of the step:
# each centroid is a ratio of sums of n terms, so the rounding of one step is a few
# units of eps * ||C||; 64 eps ||C|| bounds it with room (the measured floor, the
# difference at a sigma where every softmax leak underflows to 0, is taken if larger).
ROUNDING_UNITS = 64.0
# Fit window: from 1e2 to 1e6 times the rounding floor (the coldest four decades): 1e2
# keeps rounding below 1% of the fitted values (slope error < 0.3% over 4.6 log-units),
# 1e6 stays far below saturation (the error there is ~1e-8 of ||C||).
WINDOW = (1e2, 1e6)
MIN_FIT_POINTS = 4
# Relative tolerance on the fitted slope against -Delta_min. Over the window the
# smallest-margin point leaks exp(-12..-21) (measured on iris, wine, breast cancer,
# digits); a second point at margin (1 + e) Delta_min with a comparable weight shifts
# the local slope by about e exp(-12 e) / (1 + exp(-12 e)) <= 3% of Delta_min; 10% allows
# a few such competitors and the weights' variation.
SLOPE_RTOL = 0.10
# The first-order model must reproduce the fitted slope to this tolerance: it drops only
# terms of second order in the leaks (< 1e-8 relative inside the window), so 5% is loose.
MODEL_RTOL = 0.05


# ---------------------------------------------------------------------------------------
# Helpers shared with claims 6-8
# ---------------------------------------------------------------------------------------


def subsample(ds, ctx, max_rows):
    """Rows of ds.X (C-contiguous float64) and a note; a seeded subset when n > max_rows.

    The subset is drawn once per data set (ctx.rng("rows", name)) and is the same for
    every claim with the same max_rows.
    """
    X = np.ascontiguousarray(ds.X, dtype=np.float64)
    n = X.shape[0]
    if n <= max_rows:
        return X, ""
    idx = np.sort(ctx.rng("rows", ds.name).choice(n, size=max_rows, replace=False))
    return np.ascontiguousarray(X[idx]), f"subsampled to {max_rows} of {n} rows (seed {ctx.seed})"


def initial_centroids(X, k, ctx, name):
    """k-means++ centroids, seeded by ctx.rng("init", name, k) (same for claims 5-8)."""
    seed = int(ctx.rng("init", name, k).integers(2**31 - 1))
    C, _ = sk.kmeans_plusplus(X, k, random_state=seed)
    return np.ascontiguousarray(C, dtype=X.dtype)


def lloyd_path(X, C0, max_iter):
    """Lloyd's iterates C_0 = C0, C_1, ..., C_L and whether C_L is a fixed point.

    Lloyd = iterating the oracle's hard step. The path stops at the first step that
    returns its input bit for bit (the labels no longer change, so the same sums are
    formed), or after max_iter steps.
    """
    return O.lloyd(X, C0, max_iter)


def rounding_floor(measured_floor, C):
    """Lower end of measurable step differences: max(measured floor, 64 eps ||C||_F)."""
    eps = np.finfo(np.float64).eps
    return max(float(measured_floor), ROUNDING_UNITS * eps * float(np.linalg.norm(C)))


def margin_floor(X, C):
    """Margins at or below this are ties within float64 rounding of the oracle's distances
    (`oracle.tie_floor`: from the differences, relative to the distances). It gates the
    hypothesis Delta_min > 0 of every oracle row. A margin this small is a tie (e.g.
    integer-valued pixels equidistant from two data points chosen as centroids)."""
    X64, C64 = np.asarray(X, dtype=np.float64), np.asarray(C, dtype=np.float64)
    return O.tie_floor(O.sq_distances(X64, C64), X64.shape[1])


def expanded_margin_floor(X, C):
    """The rounding of the native core's margins, for implementation rows only.

    The core forms D_ij as ||x_i||^2 + ||c_j||^2 - 2 x_i.c_j, whose rounding is a few eps
    times ||x_i||^2 + ||c_j||^2 (eps of X's dtype); 64 eps (max ||x||^2 + max ||c||^2)
    bounds it with room.
    """
    eps = float(np.finfo(X.dtype).eps)
    X64, C64 = np.asarray(X, dtype=np.float64), np.asarray(C, dtype=np.float64)
    big = float(np.max(np.einsum("ij,ij->i", X64, X64)) + np.max(np.einsum("ij,ij->i", C64, C64)))
    return ROUNDING_UNITS * eps * big


def no_margin_note(delta_min, floor):
    """Why the hypothesis Delta_min > 0 fails, or "" when it holds."""
    if delta_min > floor:
        return ""
    return (
        f"Delta_min = {delta_min:.3g} <= {floor:.2g} (float64 rounding of D): a point on a "
        "boundary between two centroids, no margin"
    )


def fit_log_slope(x, err, floor):
    """Least-squares slope of log(err) against x over err in WINDOW * floor.

    Returns (slope, mask of the points used); slope is nan when fewer than
    MIN_FIT_POINTS points fall in the window.
    """
    x = np.asarray(x, dtype=np.float64)
    err = np.asarray(err, dtype=np.float64)
    mask = (err > WINDOW[0] * floor) & (err < WINDOW[1] * floor)
    if mask.sum() < MIN_FIT_POINTS:
        return float("nan"), mask
    return float(np.polyfit(x[mask], np.log(err[mask]), 1)[0]), mask


def first_order_error(X, C, x_values):
    """||E1(x)||_F: the first-order change of the hard step when every point i leaks mass
    exp(-(D_ij - D_i,min) x) from its centroid a_i to each other centroid j.

    With N_j and c+_j the hard step's weights and centroids, a leak e_ij moves c+_j by
    e_ij (x_i - c+_j) / N_j and c+_{a_i} by -e_ij (x_i - c+_{a_i}) / N_{a_i}. Computed from
    the distances only (no softmax step), so it checks the measured curve independently.
    """
    D = O.sq_distances(X, C)
    labels = np.argmin(D, axis=1)
    gaps = D - D[np.arange(len(D)), labels][:, None]
    gaps[np.arange(len(D)), labels] = np.inf  # no leak to the own centroid
    Cp, N = O.step_from(X, C, O.hard(D))
    N = np.where(N > 0, N, np.inf)
    k = C.shape[0]
    onehot = np.zeros((len(D), k))
    onehot[np.arange(len(D)), labels] = 1.0
    out = []
    for x in x_values:
        with np.errstate(under="ignore"):
            leak = np.exp(-gaps * x)  # (n, k), 0 at the own centroid
        gain = (X.T @ leak).T - leak.sum(axis=0)[:, None] * Cp  # sum_i e_ij (x_i - c+_j)
        lost = leak.sum(axis=1)
        loss = (X.T @ (onehot * lost[:, None])).T - (onehot.T @ lost)[:, None] * Cp
        out.append(float(np.linalg.norm((gain - loss) / N[:, None])))
    return np.array(out)


def min_gap(X, C):
    """Delta_min of the native core (`softkmeans.margins`), for the implementation check."""
    return float(np.min(sk.margins(X, C)))


def model_fit(X, C, x, mask, floor):
    """(slope of the first-order model, whether the model is measurable on the grid).

    Over the measured curve's window when it has MIN_FIT_POINTS points; otherwise the
    model's own window: a model above rounding where the measured curve is not means the
    measured difference vanished where the theory predicts it (a FAIL, not a premise)."""
    if mask.sum() >= MIN_FIT_POINTS:
        model = first_order_error(X, C, x[mask])
        return float(np.polyfit(x[mask], np.log(model), 1)[0]), True
    model_slope, _ = fit_log_slope(x, first_order_error(X, C, x), floor)
    return model_slope, bool(np.isfinite(model_slope))


def slope_status(slope, model_slope, delta_min, model_measurable=True):
    """(status, reason) for a fitted slope against -Delta_min (see the module docstring).

    PASS when the slope is at least as steep as -Delta_min (1 - SLOPE_RTOL), FAIL when
    shallower; with no sigma of the grid above rounding, FAIL when the first-order model
    is above it there (model_measurable) and "hypothesis not met" otherwise.
    """
    if not np.isfinite(slope):
        if model_measurable:
            return FAIL, (
                "no sigma where the difference is above rounding, while the first-order "
                "model of the leaks is (the difference vanished where the theory predicts it)"
            )
        return NOT_MET, "no sigma where the difference or its first-order model is above rounding"
    rel = slope / -delta_min
    if rel < 1.0 - SLOPE_RTOL:
        model_rel = model_slope / -delta_min
        return FAIL, f"shallower than -Delta_min; first-order model slope {model_rel:.3f} Delta_min"
    if rel <= 1.0 + SLOPE_RTOL:
        return PASS, ""
    model_rel = model_slope / -delta_min
    return PASS, (
        f"steeper than -Delta_min, as the O(.) bound allows (points with margins just above "
        f"Delta_min dominate at this sigma: the first-order model's slope is "
        f"{model_rel:.3f} Delta_min)"
    )


def entry_bound_ratio(D, sigmas, factor=1.0):
    """max over sigma, i and j != a_i of r_ij / exp(-factor Delta_i / (2 sigma^2)) (oracle
    softmax); factor 1 is the claim's constant. Entries whose bound underflows are skipped
    (r_ij is then 0 too: its exponent is at most the bound's)."""
    m = O.margins(D)
    lab = O.labels(D)
    worst = 0.0
    for s in sigmas:
        r = O.softmax(D, s)
        r[np.arange(len(lab)), lab] = 0.0
        with np.errstate(under="ignore"):
            bound = np.exp(-factor * m / (2.0 * s * s))
        keep = bound > 0
        if np.any(keep):
            worst = max(worst, float((r[keep].max(axis=1) / bound[keep]).max()))
    return worst


# ---------------------------------------------------------------------------------------
# The claim
# ---------------------------------------------------------------------------------------


ENTRY_FACTOR = 1.0  # the per-entry bound's constant: exp(-ENTRY_FACTOR Delta_i / (2 sigma^2))


def rate_curve(X, C, n_grid, t_max=45.0):
    """The oracle's step difference on a grid of t = Delta_min x, x = 1 / (2 sigma^2).

    Returns a dict with delta_min, t, x, sigma, err, floor, slope, mask, model_slope,
    entry_ratio, impl (native vs oracle), scale (||step_hard(C)||_F); err and floor are
    absolute (Frobenius). t runs from 0.25 (saturated) to t_max (exp(-45) ~ 3e-20).
    """
    X = np.asarray(X, dtype=np.float64)
    C = np.asarray(C, dtype=np.float64)
    D = O.sq_distances(X, C)
    delta_min = float(O.margins(D).min())
    hard = O.step_from(X, C, O.hard(D))[0]
    out = {"delta_min": delta_min, "scale": float(np.linalg.norm(hard))}
    out["margin_floor"] = margin_floor(X, C)
    out["gap_min"] = min_gap(X, C)
    out["native_floor"] = expanded_margin_floor(X, C)
    if no_margin_note(delta_min, out["margin_floor"]):
        return out
    t = np.linspace(0.25, t_max, n_grid)
    x = t / delta_min
    sigma = np.sqrt(1.0 / (2.0 * x))
    steps = [O.step_from(X, C, O.softmax(D, s))[0] for s in sigma]
    err = np.array([np.linalg.norm(S - hard) for S in steps])
    # At t = 1e4 every leak exp(-Delta_i x) underflows to 0 (below the smallest normal):
    # what remains is the rounding difference of the two sums.
    cold = O.step_from(X, C, O.softmax(D, float(np.sqrt(delta_min / 2e4))))[0]
    floor = rounding_floor(np.linalg.norm(cold - hard), hard)
    slope, mask = fit_log_slope(x, err, floor)
    model_slope, measurable = model_fit(X, C, x, mask, floor)
    out.update(t=t, x=x, sigma=sigma, err=err, floor=floor, slope=slope, mask=mask)
    out.update(model_slope=model_slope, model_measurable=measurable)
    out["entry_ratio"] = entry_bound_ratio(D, sigma[:: max(1, n_grid // 12)], ENTRY_FACTOR)
    picks = np.linspace(0, n_grid - 1, 4).astype(int)
    native = [sk.centroid_step(X, C, float(sigma[i]), kind="softmax").centroids for i in picks]
    out["impl"] = max(
        float(np.abs(nat - steps[i]).max()) / max(float(np.abs(steps[i]).max()), 1e-300)
        for nat, i in zip(native, picks)
    )
    return out


IMPL_RTOL = 1e-10  # SPEC.md float64 parity
ENTRY_RTOL = 1e-9  # r_ij / bound <= 1 + this (logsumexp rounding)


def _rows(ds_name, k, where, curve, note_extra, identity=False):
    """The slope row (evidence), the per-entry bound row (an identity: r_ij <= exp(-Delta_i
    / (2 sigma^2)) holds for any D; only when `identity`) and the implementation check."""
    dmin = curve["delta_min"]
    quantity = f"oracle: slope of log||softmax step - Lloyd step|| vs 1/(2 sigma^2), C = {where}"
    q_entry = f"identity: max r_ij / exp(-Delta_i / (2 sigma^2)), j != a_i, C = {where}"
    q_impl = f"implementation check: native softmax step and margins vs oracle, C = {where}"
    why = no_margin_note(dmin, curve["margin_floor"])
    nan = float("nan")
    if why:
        return [
            Row(NUMBER, ds_name, k, q, nan, -dmin, NOT_MET, why + note_extra)
            for q in (quantity, *([q_entry] if identity else []), q_impl)
        ]
    slope, mask = curve["slope"], curve["mask"]
    status, reason = slope_status(slope, curve["model_slope"], dmin, curve["model_measurable"])
    note = f"Delta_min={dmin:.4g}; fitted slope = {slope / -dmin:.4f} Delta_min"
    if mask.sum():
        s = curve["sigma"][mask]
        note += (
            f" over sigma in [{s.min():.3g}, {s.max():.3g}] ({int(mask.sum())} points, "
            f"Delta_min/(2 sigma^2) in [{curve['t'][mask].min():.1f}, "
            f"{curve['t'][mask].max():.1f}], error {curve['err'][mask].min():.2g}.."
            f"{curve['err'][mask].max():.2g}, rounding floor {curve['floor']:.2g})"
        )
        note += f"; first-order model slope {curve['model_slope'] / -dmin:.4f} Delta_min"
    if reason:
        note += f"; {reason}"
    er = curve["entry_ratio"]
    gap_err = abs(curve["gap_min"] - dmin)
    impl_ok = curve["impl"] <= IMPL_RTOL and gap_err <= max(1e-6 * dmin, curve["native_floor"])
    entry = Row(
        NUMBER, ds_name, k, q_entry, er, 1.0, PASS if er <= 1.0 + ENTRY_RTOL else FAIL,
        f"holds for any D (pins the constant only); Delta_min={dmin:.4g}; every 12th sigma "
        "of the grid, every point" + note_extra, role=IDENTITY,
    )  # fmt: skip
    return [
        Row(NUMBER, ds_name, k, quantity, slope, -dmin, status, note + note_extra),
        *([entry] if identity else []),
        Row(
            NUMBER,
            ds_name,
            k,
            q_impl,
            curve["impl"],
            IMPL_RTOL,
            PASS if impl_ok else FAIL,
            f"max relative step difference {curve['impl']:.2g} at 4 sigmas; native Delta_min "
            f"{curve['gap_min']:.8g} vs oracle {dmin:.8g}" + note_extra,
        ),
    ]


def _figure(ds, curves, ctx):
    plt = pyplot()
    path = ctx.figure_path(f"claim5_rate_{ds.name}")
    if plt is None or path is None or not curves:
        return
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    wheres = ("k-means++ init", "Lloyd fixed point")
    for ax, where in zip(axes, wheres):
        ks = sorted({k for k, _, _ in curves})
        for k, w, c in curves:
            if w != where or "err" not in c:
                continue
            color = f"C{ks.index(k) % 10}"
            rel = c["err"] / c["scale"]
            shown = rel > 0
            ax.semilogy(c["t"][shown], rel[shown], ".-", color=color, lw=1, ms=3, label=f"k={k}")
            if np.isfinite(c["slope"]):
                m = c["mask"]
                fit = np.polyfit(c["x"][m], np.log(c["err"][m]), 1)
                tt = c["t"][m]
                ax.semilogy(
                    tt,
                    np.exp(np.polyval(fit, tt / c["delta_min"])) / c["scale"],
                    "-",
                    color=color,
                    lw=3,
                    alpha=0.4,
                    label=f"k={k} fit: slope -{c['slope'] / -c['delta_min']:.3f} (predicted -1)",
                )
        ax.set_title(f"C = {where}")
        ax.set_xlabel("Delta_min / (2 sigma^2)  (dimensionless; slope -1 = rate Delta_min)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    axes[0].set_ylabel("||softmax - Lloyd step|| / ||Lloyd step||")
    axes[0].set_ylim(bottom=1e-20)  # below: float64 rounding of the step, nothing to read
    fig.suptitle(
        f"Claim 5, {ds.name}: softmax step -> Lloyd step at rate exp(-Delta_min/(2 sigma^2))"
        "\n(thick: least-squares fit over the coldest 4 decades above float64 rounding)"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run(ds, ks, ctx):
    """Rows: per k, the fitted rate at the k-means++ init and at the Lloyd fixed point."""
    X, sub_note = subsample(ds, ctx, 3000 if ctx.quick else 20000)
    n_grid = 50 if ctx.quick else 120
    rows, curves = [], []
    for k in ks:
        if k < 2 or k > X.shape[0]:
            continue
        C0 = initial_centroids(X, k, ctx, ds.name)
        path, converged = lloyd_path(X, C0, 100 if ctx.quick else 300)
        lloyd_note = f"Lloyd: {len(path) - 1} steps" + ("" if converged else " (not converged)")
        extra = "; " + "; ".join(s for s in (lloyd_note, sub_note) if s)
        for where, C in (("k-means++ init", C0), ("Lloyd fixed point", path[-1])):
            curve = rate_curve(X, C, n_grid)
            curves.append((k, where, curve))
            identity = ds.name == IDENTITY_HOST and k == ks[0] and where == "Lloyd fixed point"
            rows += _rows(ds.name, k, where, curve, extra, identity)
    _figure(ds, curves, ctx)
    return rows

"""Claim 8: near a Lloyd fixed point with margin, softmax has a nearby local minimizer.

From a Lloyd fixed point C* (the oracle's Lloyd from the k-means++ init; its step returns
C* bit for bit) with margin Delta* = Delta_min(C*) > 0 and no empty cluster (an empty
cluster is degenerate: the hypothesis is not met), the softmax iteration started at C*
converges to C_sigma (found by the native core, fast). Every verdict is the oracle's
(`softkmeans.experiments.oracle`, float64 from the definitions):

- C_sigma is stationary: the oracle's softmax step moves it by <= STATIONARY_RTOL ||C*||;
- C_sigma is a local minimizer: the Hessian of F_sigma at C_sigma,
      H_jl = 2 N_j delta_jl I - (4 / T) sum_i r_ij (delta_jl - r_il) a_ij a_il^T,
  a_ij = c_j - x_i, T = 2 sigma^2, is positive definite at EVERY sigma of the grid at
  which C_sigma keeps Lloyd's partition, the hottest one included. The deviation
  1 - lambda_min / (2 N_min) from the hard Hessian 2 N_j I is checked against a bound
  derived with its constants: with eps_i = 1 - max_j r_ij and R_i = max_j ||c_j - x_i||,
  v^T (sum_i r_ij (delta_jl - r_il) a_ij a_il^T) v is the variance of a_ij . v_j under
  r_i, at most 4 eps_i R_i^2 ||v||^2, and N_j >= N_j(hard) - sum_i eps_i, so
  1 - lambda_min / (2 N_min) <= (sum_i eps_i + (8 / T) sum_i eps_i R_i^2) / N_min
  (r from the oracle at C_sigma; a larger deviation FAILs);
- ||C_sigma - C*|| = O(exp(-Delta* / (2 sigma^2))): the fitted slope of its log against
  1 / (2 sigma^2) is at least as steep as -Delta* (claim 5's window and tolerance).

Up to three fixed points per k: the one from the k-means++ seed of claims 5-7, the one
with the smallest margin among a few more seeds, and the one with the smallest cluster
(fewest points, N_min) among those seeds and as many "outlier" seeds (k - 1 k-means++
centroids plus the data point farthest from them, which tends to leave a tiny cluster
around an outlier at the fixed point): small margins and small clusters are where the
statement is tested hardest (the hard Hessian is 2 N_j I, so the correction is relative
to 2 N_min). A fixed point is a candidate only with a margin and no empty cluster; one
equal to an earlier one is not repeated. Real data sets seldom keep a cluster of a few
points at a Lloyd fixed point, so the run also checks, once (with the data set
SMALL_HOST), a constructed one: X = [0, 1, 2, 10, 11, 14, 30] and C* = [1, 35/3, 30],
k = 3, a Lloyd fixed point whose third cluster is the single point 30 (N_min = 1,
Delta* = 704/9 at x = 10). The native step's agreement with the oracle's at
C_sigma is a separate "implementation check" row.
"""

from __future__ import annotations

import numpy as np

import softkmeans as sk

from . import oracle as O
from ._common import FAIL, NOT_MET, PASS, Row, pyplot
from .claim5_rate import (
    fit_log_slope,
    initial_centroids,
    lloyd_path,
    margin_floor,
    model_fit,
    no_margin_note,
    rounding_floor,
    slope_status,
    subsample,
)

NUMBER = 8
TITLE = "Softmax fixed points near Lloyd's"

# Positive definite means lambda_min > PD_RTOL * 2 N_min: the Hessian's entries carry a
# relative rounding of ~n eps (sums of n terms), far below 1e-9 for n <= 1e6.
PD_RTOL = 1e-9
STATIONARY_RTOL = 1e-10  # the oracle's step at C_sigma moves it by at most this x ||C*||
IMPL_RTOL = 1e-10
# The constructed fixed point with a one-point cluster (its rows go with SMALL_HOST).
SMALL_X = np.array([[0.0], [1.0], [2.0], [10.0], [11.0], [14.0], [30.0]])
SMALL_C = np.array([[1.0], [35.0 / 3.0], [30.0]])
SMALL_HOST = "blobs-separated"  # in both --quick and the full run
DENSE_MAX = 400  # kd up to which the Hessian is formed densely (oracle); above, Lanczos
MAX_HESSIANS = 8  # sigmas at which a Lanczos Hessian is computed (kd > DENSE_MAX)


def softmax_fixed_point(X, C, sigma, max_iter):
    """Iterate the softmax step from C until it moves by <= 16 eps ||C||_F.

    Returns (C_sigma, iterations, converged).
    """
    tol = 16.0 * np.finfo(np.float64).eps * float(np.linalg.norm(C))
    for it in range(1, max_iter + 1):
        new = sk.centroid_step(X, C, sigma, kind="softmax").centroids
        moved = float(np.linalg.norm(new - C))
        C = new
        if moved <= tol:
            return C, it, True
    return C, max_iter, False


def smallest_eigenvalue(X, C, sigma):
    """lambda_min of the Hessian of F_sigma at C (the oracle's)."""
    return O.softmax_hessian_min(X, C, sigma, DENSE_MAX)


def deviation_bound(X, C, sigma, n_min):
    """(sum_i eps_i + (8 / T) sum_i eps_i R_i^2) / N_min at C (see the module docstring)."""
    D = O.sq_distances(X, C)
    eps = 1.0 - O.softmax(D, sigma).max(axis=1)
    T = 2.0 * sigma * sigma
    return float((eps.sum() + (8.0 / T) * np.sum(eps * D.max(axis=1))) / n_min)


def analyse(X, C_star, n_grid, max_iter, t_max=45.0):
    """Distances, stationarity, partitions and Hessians on a grid of sigma."""
    X = np.asarray(X, dtype=np.float64)
    D = O.sq_distances(X, C_star)
    delta = float(O.margins(D).min())
    out = {"delta": delta, "why": no_margin_note(delta, margin_floor(X, C_star))}
    N = O.hard(D).sum(axis=0)
    out["n_min"] = float(N.min())
    if not out["why"] and np.any(N == 0):
        out["why"] = f"{int(np.sum(N == 0))} empty cluster(s) at C*: a degenerate fixed point"
    if out["why"]:
        return out
    labels = O.labels(D)
    t = np.linspace(0.5, t_max, n_grid)
    x = t / delta
    sigma = np.sqrt(1.0 / (2.0 * x))
    points, dist, iters, conv, kept, resid = [], [], [], [], [], []
    scale = float(np.linalg.norm(C_star))
    for s in sigma:
        Cs, it, ok = softmax_fixed_point(X, C_star, float(s), max_iter)
        points.append(Cs)
        dist.append(float(np.linalg.norm(Cs - C_star)))
        iters.append(it)
        conv.append(ok)
        kept.append(bool(np.array_equal(O.labels(O.sq_distances(X, Cs)), labels)))
        resid.append(float(np.linalg.norm(O.step(X, Cs, float(s))[0] - Cs)) / scale)
    dist = np.array(dist)
    cold, _, _ = softmax_fixed_point(X, C_star, float(np.sqrt(delta / 2e4)), max_iter)
    floor = rounding_floor(np.linalg.norm(cold - C_star), C_star)
    slope, mask = fit_log_slope(x, dist, floor)
    model_slope, out["model_measurable"] = model_fit(X, C_star, x, mask, floor)
    # Hessians at every sigma that keeps Lloyd's partition (a few, spread, when Lanczos).
    kept_idx = np.flatnonzero(kept)
    k, d = C_star.shape
    if k * d > DENSE_MAX and kept_idx.size > MAX_HESSIANS:
        picks = kept_idx[np.linspace(0, kept_idx.size - 1, MAX_HESSIANS).astype(int)]
        picks = sorted(set(picks.tolist()) | {int(kept_idx[0])})
    else:
        picks = kept_idx.tolist()
    eig = {
        i: smallest_eigenvalue(X, points[i], float(sigma[i])) / (2.0 * out["n_min"]) for i in picks
    }
    pred = {i: deviation_bound(X, points[i], float(sigma[i]), out["n_min"]) for i in picks}
    i_imp = int(kept_idx[0]) if kept_idx.size else 0
    native = sk.centroid_step(X, points[i_imp], float(sigma[i_imp]), kind="softmax").centroids
    want = O.step(X, points[i_imp], float(sigma[i_imp]))[0]
    impl = float(np.abs(native - want).max()) / max(float(np.abs(want).max()), 1e-300)
    out.update(
        t=t, x=x, sigma=sigma, dist=dist, iters=np.array(iters), conv=np.array(conv),
        kept=np.array(kept), floor=floor, slope=slope, mask=mask, model_slope=model_slope,
        eig=eig, pred=pred, resid=np.array(resid), scale=scale, impl=impl, impl_sigma=sigma[i_imp],
    )  # fmt: skip
    return out


def _rows(ds_name, k, a, extra):
    q_rate = "oracle: slope of log||C_sigma - C*|| vs 1/(2 sigma^2), vs -Delta*"
    q_hess = (
        "oracle: min over sigma keeping Lloyd's partition of lambda_min(Hessian of F_sigma "
        "at C_sigma) / (2 N_min)"
    )
    q_impl = "implementation check: native softmax step at C_sigma vs oracle"
    nan = float("nan")
    if a["why"]:
        return [
            Row(NUMBER, ds_name, k, q, nan, nan, NOT_MET, a["why"] + extra)
            for q in (q_rate, q_hess, q_impl)
        ]
    rate = Row(NUMBER, ds_name, k, q_rate, *_rate(a, extra))
    hess = Row(NUMBER, ds_name, k, q_hess, *_hessian(a, extra))
    impl = Row(
        NUMBER, ds_name, k, q_impl, a["impl"], IMPL_RTOL, PASS if a["impl"] <= IMPL_RTOL else FAIL,
        f"relative difference at sigma = {a['impl_sigma']:.4g}" + extra,
    )  # fmt: skip
    return [rate, hess, impl]


def _rate(a, extra):
    """(measured, predicted, status, note) of the fitted log-slope of ||C_sigma - C*||
    against -Delta*."""
    d, mask = a["delta"], a["mask"]
    status, reason = slope_status(a["slope"], a["model_slope"], d, a["model_measurable"])
    note = f"Delta*={d:.4g}, N_min={a['n_min']:.0f}; fitted slope = {a['slope'] / -d:.4f} Delta*"
    if mask.sum():
        s = a["sigma"][mask]
        note += (
            f" over sigma in [{s.min():.3g}, {s.max():.3g}] ({int(mask.sum())} points, distance "
            f"{a['dist'][mask].min():.2g}..{a['dist'][mask].max():.2g}); softmax iterations "
            f"to converge <= {int(a['iters'][mask].max())}"
        )
    if reason:
        note += f"; {reason}"
    return a["slope"], -d, status, note + extra


def _hessian(a, extra):
    """(measured, predicted, status, note) of the Hessian row: positive definite at every
    sigma that keeps Lloyd's partition, its deviation from 2 N_min within its bound, and
    C_sigma stationary."""
    kept = a["kept"]
    eig = a["eig"]
    lam = min(eig.values()) if eig else float("nan")
    stationary = bool(np.all(a["resid"][kept] <= STATIONARY_RTOL))
    over = [i for i, v in eig.items() if 1.0 - v > a["pred"][i] + PD_RTOL]
    ok = bool(eig) and lam > PD_RTOL and stationary and not over
    parts = [
        f"Delta*={a['delta']:.4g}, N_min={a['n_min']:.0f}; {len(eig)} Hessians over "
        f"{int(kept.sum())} of {len(kept)} sigmas that keep Lloyd's partition",
        *_hessian_details(a, over),
        f"stationary (oracle step residual <= {STATIONARY_RTOL:g} ||C*||): {stationary}",
    ]
    if not kept.all():
        lost = np.flatnonzero(~kept)
        parts.append(
            f"partition not kept at {lost.size} sigmas (the coldest {a['sigma'][lost].min():.4g})"
        )
    return lam, 0.0, PASS if ok else FAIL, "; ".join(parts) + extra


def _hessian_details(a, over):
    """The note's readings of the Hessians: at the hottest kept sigma, the deviation over
    its bound (where above the eigenvalue's rounding PD_RTOL), and where it exceeds it."""
    kept, eig = a["kept"], a["eig"]
    hot = int(np.flatnonzero(kept)[0]) if kept.any() else None
    ratio = [
        (1.0 - v) / a["pred"][i] for i, v in eig.items() if 1.0 - v > PD_RTOL and a["pred"][i] > 0
    ]
    parts = []
    if hot is not None:
        parts.append(
            f"hottest kept sigma {a['sigma'][hot]:.4g} (Delta*/(2 sigma^2) = {a['t'][hot]:.2g}): "
            f"lambda_min / (2 N_min) = {eig.get(hot, float('nan')):.4g}"
        )
    if ratio:
        parts.append(
            "(1 - lambda_min/(2 N_min)) / its bound (sum eps + (8/T) sum eps R^2) / N_min in "
            f"[{min(ratio):.3g}, {max(ratio):.3g}]"
        )
    if over:
        i = over[0]
        parts.append(
            f"deviation above its bound at {len(over)} sigma(s): {1.0 - eig[i]:.3g} > "
            f"{a['pred'][i]:.3g} at sigma {a['sigma'][i]:.4g}"
        )
    return parts


def _figure(ds, results, ctx):
    plt = pyplot()
    path = ctx.figure_path(f"claim8_fixed_points_{ds.name}")
    results = [(k, a) for k, a in results if not a["why"]]
    if plt is None or path is None or not results:
        return
    fig, (ax, hx) = plt.subplots(1, 2, figsize=(13, 4.6))
    floor = 1e-17
    for i, (k, a) in enumerate(results):
        idx = sorted(a["eig"])
        dev = np.array([max(1.0 - a["eig"][j], floor) for j in idx])
        hx.semilogy(a["t"][idx], dev, "o", color=f"C{i % 10}", ms=3, label=f"k={k}")
    for i, (k, a) in enumerate(results):
        idx = sorted(a["eig"])
        bound = np.array([max(a["pred"][j], floor) for j in idx])
        hx.semilogy(a["t"][idx], bound, "-", color=f"C{i % 10}", lw=1, alpha=0.6,
                    label=f"k={k}: bound (sum eps + (8/T) sum eps R^2) / N_min")  # fmt: skip
    hx.set_ylim(floor / 2, 10.0)
    hx.set_xlabel("Delta* / (2 sigma^2)  (dimensionless)")
    hx.set_ylabel("1 - lambda_min(Hessian) / (2 N_min)  (dimensionless)")
    hx.set_title("Hessian at C_sigma vs the hard 2 N_j I (oracle; > 1: not positive)")
    hx.grid(True, which="both", alpha=0.3)
    hx.legend(fontsize=7)
    for i, (k, a) in enumerate(results):
        color = f"C{i % 10}"
        rel = a["dist"] / a["scale"]
        shown = rel > 0
        ax.semilogy(a["t"][shown], rel[shown], ".-", color=color, lw=1, ms=3, label=f"k={k}")
        if np.isfinite(a["slope"]):
            m = a["mask"]
            fit = np.polyfit(a["x"][m], np.log(a["dist"][m]), 1)
            ax.semilogy(
                a["t"][m], np.exp(np.polyval(fit, a["x"][m])) / a["scale"], "-", color=color,
                lw=3, alpha=0.4, label=f"k={k} fit: slope -{a['slope'] / -a['delta']:.3f} Delta*",
            )  # fmt: skip
    ax.set_xlabel("Delta* / (2 sigma^2)  (dimensionless; slope -1 = rate Delta*)")
    ax.set_ylabel("||C_sigma - C*||_F / ||C*||_F")
    ax.set_title(
        f"Claim 8, {ds.name}: softmax fixed point C_sigma -> Lloyd fixed point C*\n"
        "(thick: fit over the coldest 4 decades above float64 rounding)"
    )
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _outlier_seed(X, k, seed):
    """k - 1 k-means++ centroids plus the data point farthest from them."""
    C = np.asarray(sk.kmeans_plusplus(X, k - 1, random_state=seed)[0], dtype=np.float64)
    far = int(np.argmax(O.sq_distances(X, C).min(axis=1)))
    return np.vstack([C, X[far : far + 1]])


def _fixed_points(X, k, ctx, name, n_seeds, max_iter):
    """[(label, C*, note)]: the fixed point from claims 5-7's seed, the one with the
    smallest margin among n_seeds more seeds, and the one with the smallest cluster among
    those and n_seeds outlier seeds (each when it differs from the ones before)."""
    out = []
    C0 = np.asarray(initial_centroids(X, k, ctx, name), dtype=np.float64)
    path, converged = lloyd_path(X, C0, max_iter)
    out.append(("seed", path[-1] if converged else None, f"Lloyd: {len(path) - 1} steps"))
    best, small = None, None
    for i in range(2 * n_seeds):
        seed = int(ctx.rng("claim8", name, k, i).integers(2**31 - 1))
        if i < n_seeds:
            Ci = np.asarray(sk.kmeans_plusplus(X, k, random_state=seed)[0], dtype=np.float64)
        else:
            Ci = _outlier_seed(X, k, seed)
        p, c = lloyd_path(X, Ci, max_iter)
        if not c:
            continue
        D = O.sq_distances(X, p[-1])
        m = float(O.margins(D).min())
        n_min = int(O.hard(D).sum(axis=0).min())
        if m <= margin_floor(X, p[-1]) or n_min == 0:
            continue
        if i < n_seeds and (best is None or m < best[0]):
            best = (m, p[-1], len(p) - 1)
        if small is None or (n_min, m) < small[:2]:
            small = (n_min, m, p[-1], "outlier" if i >= n_seeds else "k-means++")
    if best is not None and not np.array_equal(best[1], out[0][1]):
        out.append(("smallest margin", best[1], f"smallest margin of {n_seeds} seeds"))
    if small is not None and not any(np.array_equal(small[2], C) for _, C, _ in out):
        out.append(
            (
                "smallest cluster",
                small[2],
                f"N_min = {small[0]}, the fewest of {n_seeds} k-means++ and {n_seeds} outlier "
                f"seeds (a {small[3]} seed)",
            )
        )
    return out


def run(ds, ks, ctx):
    """Rows per k and fixed point: the rate, the Hessian check, the implementation check."""
    X, sub_note = subsample(ds, ctx, 1000 if ctx.quick else 3000)
    rows, results = [], []
    for k in ks:
        if k < 2 or k > X.shape[0]:
            continue
        for label, C_star, lnote in _fixed_points(
            X, k, ctx, ds.name, 2 if ctx.quick else 4, 100 if ctx.quick else 300
        ):
            extra = f"; C* = {label} ({lnote})" + (f"; {sub_note}" if sub_note else "")
            if C_star is None:
                rows += _rows(ds.name, k, {"why": "no Lloyd fixed point reached"}, extra)
                continue
            a = analyse(X, C_star, 24 if ctx.quick else 40, 200 if ctx.quick else 1000)
            if label == "seed":
                results.append((k, a))
            rows += _rows(ds.name, k, a, extra)
    _figure(ds, results, ctx)
    if ds.name == SMALL_HOST:
        a = analyse(SMALL_X, SMALL_C, 24 if ctx.quick else 40, 200 if ctx.quick else 1000)
        extra = (
            f"; C* = constructed small cluster: X = {SMALL_X.ravel().tolist()}, "
            "C* = [1, 35/3, 30] (a Lloyd fixed point; the cluster {30} has one point)"
        )
        rows += _rows(ds.name, SMALL_C.shape[0], a, extra)
    return rows

"""Claim 8: near a Lloyd fixed point with margin, softmax has a nearby local minimizer.

From a Lloyd fixed point C* (reached from the k-means++ init; Lloyd's step returns it bit
for bit) with margin Delta* = Delta_min(C*) > 0, the softmax iteration (alternating
minimization of F_sigma) started at C* converges to C_sigma. The claim:

- C_sigma is a local minimizer of F_sigma: the Hessian of F_sigma at C_sigma is
  positive definite. With r the softmax responsibilities, a_ij = c_j - x_i, T = 2 sigma^2,
      H_jl = 2 N_j delta_jl I - (4 / T) sum_i r_ij (delta_jl - r_il) a_ij a_il^T,
  the derivative of SPEC.md's dF/dc_j = 2 sum_i r_ij a_ij (the tests check it against
  finite differences of `softkmeans.gradients`). Its smallest eigenvalue is reported
  relative to 2 N_min, the value it has as sigma -> 0 (the hard Hessian 2 N_j I).
- ||C_sigma - C*|| shrinks like exp(-Delta* / (2 sigma^2)): the fitted slope of its log
  against 1 / (2 sigma^2) is compared with -Delta*, with claim 5's window, tolerance and
  first-order model (at a fixed point with margin the soft map's Jacobian is
  O(exp(-Delta* x) x), so C_sigma - C* is the first soft step's change to first order).

Where the statement stops holding is reported too: the hottest sigma of the grid at
which C_sigma still has Lloyd's partition.
"""

from __future__ import annotations

import numpy as np

import softkmeans as sk

from ._common import Row, pyplot
from .claim5_rate import (
    MIN_FIT_POINTS,
    first_order_error,
    fit_log_slope,
    initial_centroids,
    lloyd_path,
    margin_floor,
    min_gap,
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
DENSE_MAX = 256  # kd up to which the Hessian is formed densely; above, Lanczos on H v
N_HESSIANS = (
    5  # (3 in quick mode) sigmas at which the Hessian is checked (keeps a run within budget)
)


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


def hessian_vector(X, C, sigma, V, r=None):
    """H V for the Hessian H of F_sigma at C (unit weights), V of shape (k, d).

    r: the softmax responsibilities at (C, sigma), computed when None.
    """
    if r is None:
        r = sk.responsibilities(X, C, sigma, kind="softmax").astype(np.float64)
    T = 2.0 * sigma * sigma
    N = r.sum(axis=0)
    # p_ij = a_ij . v_j with a_ij = c_j - x_i;  q_i = sum_l r_il p_il.
    P = np.einsum("jd,jd->j", C, V)[None, :] - X @ V.T
    q = np.einsum("ij,ij->i", r, P)
    G = r * (P - q[:, None])  # g_ij = r_ij (p_ij - q_i)
    # sum_i g_ij a_ij = c_j sum_i g_ij - sum_i g_ij x_i
    correction = G.sum(axis=0)[:, None] * C - G.T @ X
    return 2.0 * N[:, None] * V - (4.0 / T) * correction


def hessian_dense(X, C, sigma):
    """The (kd, kd) Hessian of F_sigma at C (unit weights), centroid-major ordering."""
    r = sk.responsibilities(X, C, sigma, kind="softmax").astype(np.float64)
    T = 2.0 * sigma * sigma
    n, k = r.shape
    d = C.shape[1]
    A = C[None, :, :] - X[:, None, :]  # (n, k, d): a_ij
    B = (r[:, :, None] * A).reshape(n, k * d)  # rows r_ij a_ij
    H = (4.0 / T) * (B.T @ B)
    for j in range(k):
        block = A[:, j, :].T @ (r[:, j, None] * A[:, j, :])
        sl = slice(j * d, (j + 1) * d)
        H[sl, sl] += 2.0 * r[:, j].sum() * np.eye(d) - (4.0 / T) * block
    return H


def smallest_eigenvalue(X, C, sigma):
    """lambda_min of the Hessian of F_sigma at C (dense, or Lanczos on H v when kd is large)."""
    k, d = C.shape
    if k * d <= DENSE_MAX:
        return float(np.linalg.eigvalsh(hessian_dense(X, C, sigma))[0])
    from scipy.sparse.linalg import LinearOperator, eigsh

    r = sk.responsibilities(X, C, sigma, kind="softmax").astype(np.float64)
    op = LinearOperator(
        (k * d, k * d),
        matvec=lambda v: hessian_vector(X, C, sigma, np.reshape(v, (k, d)), r).ravel(),
        dtype=np.float64,
    )
    return float(eigsh(op, k=1, which="SA", tol=1e-8, return_eigenvectors=False)[0])


def analyse(X, C_star, n_grid, max_iter, t_max=45.0, n_hessians=N_HESSIANS):
    """Distances, convergence, partitions and Hessian checks on a grid of sigma."""
    delta = float(sk.margins(X, C_star).min())
    out = {"delta": delta, "why": no_margin_note(delta, margin_floor(X, C_star))}
    out["gap_min"] = min_gap(X, C_star)
    if out["why"]:
        return out
    labels = sk.assign(X, C_star)[0]
    t = np.linspace(0.5, t_max, n_grid)
    x = t / delta
    sigma = np.sqrt(1.0 / (2.0 * x))
    points, dist, iters, conv, kept = [], [], [], [], []
    for s in sigma:
        Cs, it, ok = softmax_fixed_point(X, C_star, float(s), max_iter)
        points.append(Cs)
        dist.append(float(np.linalg.norm(Cs - C_star)))
        iters.append(it)
        conv.append(ok)
        kept.append(bool(np.array_equal(sk.assign(X, Cs)[0], labels)))
    dist = np.array(dist)
    cold, _, _ = softmax_fixed_point(X, C_star, float(np.sqrt(delta / 2e4)), max_iter)
    floor = rounding_floor(np.linalg.norm(cold - C_star), C_star)
    slope, mask = fit_log_slope(x, dist, floor)
    model_slope = float("nan")
    if mask.sum() >= MIN_FIT_POINTS:
        model = first_order_error(X, C_star, x[mask])
        model_slope = float(np.polyfit(x[mask], np.log(model), 1)[0])
    # Hessian checks: a few sigmas of the fit window and the hottest converged sigma.
    window = np.flatnonzero(mask)
    picks = set(window[np.linspace(0, window.size - 1, n_hessians - 1).astype(int)].tolist())
    converged = np.flatnonzero(conv)
    if converged.size:
        picks.add(int(converged[0]))
    n_min = max(1.0, float(np.min(sk.centroid_step(X, C_star, kind="hard").cluster_weights)))
    eig = {i: smallest_eigenvalue(X, points[i], float(sigma[i])) / (2.0 * n_min) for i in picks}
    out.update(
        t=t, x=x, sigma=sigma, dist=dist, iters=np.array(iters), conv=np.array(conv),
        kept=np.array(kept), floor=floor, slope=slope, mask=mask, model_slope=model_slope,
        eig=eig, scale=float(np.linalg.norm(C_star)),
    )  # fmt: skip
    return out


def _rows(ds_name, k, a, extra):
    q_rate = "slope of log||C_sigma - C*|| vs 1/(2 sigma^2) (softmax fixed point vs Lloyd's)"
    q_hess = "smallest Hessian eigenvalue of F_sigma at C_sigma / (2 N_min)"
    nan = float("nan")
    if a["why"]:
        return [
            Row(NUMBER, ds_name, k, q, nan, nan, "hypothesis not met", a["why"] + extra)
            for q in (q_rate, q_hess)
        ]
    d, mask = a["delta"], a["mask"]
    status, reason = slope_status(a["slope"], a["model_slope"], d, a["gap_min"])
    note = f"Delta*={d:.4g}; fitted slope = {a['slope'] / -d:.4f} Delta*"
    if mask.sum():
        s = a["sigma"][mask]
        note += (
            f" over sigma in [{s.min():.3g}, {s.max():.3g}] ({int(mask.sum())} points, distance "
            f"{a['dist'][mask].min():.2g}..{a['dist'][mask].max():.2g}); first-order model "
            f"slope {a['model_slope'] / -d:.4f} Delta*; softmax iterations to converge "
            f"<= {int(a['iters'][mask].max())}"
        )
    if reason:
        note += f"; {reason}"
    rate = Row(NUMBER, ds_name, k, q_rate, a["slope"], -d, status, note + extra)

    in_window = [v for i, v in a["eig"].items() if a["mask"][i]]
    lam = min(in_window) if in_window else nan
    ok = bool(in_window) and lam > PD_RTOL and bool(np.all(a["conv"][mask]))
    lost = np.flatnonzero(~a["kept"])
    if lost.size and lost[-1] + 1 < len(a["t"]):
        c, h = lost[-1] + 1, lost[-1]
        where = (
            f"C_sigma keeps Lloyd's partition for sigma <= {a['sigma'][c]:.4g} "
            f"(Delta*/(2 sigma^2) >= {a['t'][c]:.2g}), not at sigma = {a['sigma'][h]:.4g} "
            f"(Delta*/(2 sigma^2) = {a['t'][h]:.2g})"
        )
    else:
        where = (
            f"C_sigma keeps Lloyd's partition over the whole grid (sigma <= {a['sigma'][0]:.4g})"
        )
    eigs = ", ".join(f"{a['sigma'][i]:.3g}: {v:.4g}" for i, v in sorted(a["eig"].items()))
    hess = Row(
        NUMBER,
        ds_name,
        k,
        q_hess,
        lam,
        0.0,
        "PASS" if ok else "FAIL",
        f"Delta*={d:.4g}; lambda_min / (2 N_min) at sigma = {eigs}; positive definite means "
        f"> {PD_RTOL:g} (min over the fit window); {where}" + extra,
    )
    return [rate, hess]


def _figure(ds, results, ctx):
    plt = pyplot()
    path = ctx.figure_path(f"claim8_fixed_points_{ds.name}")
    results = [(k, a) for k, a in results if not a["why"]]
    if plt is None or path is None or not results:
        return
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
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


def run(ds, ks, ctx):
    """Rows per k: the fitted rate of ||C_sigma - C*|| and the Hessian check."""
    X, sub_note = subsample(ds, ctx, 2000 if ctx.quick else 10000)
    rows, results = [], []
    for k in ks:
        if k < 2 or k > X.shape[0]:
            continue
        C0 = initial_centroids(X, k, ctx, ds.name)
        path, converged = lloyd_path(X, C0, 100 if ctx.quick else 300)
        notes = [f"Lloyd: {len(path) - 1} steps"]
        if not converged:
            notes.append("Lloyd not converged within the cap: C* is not a fixed point")
        if sub_note:
            notes.append(sub_note)
        extra = "; " + "; ".join(notes)
        if not converged:
            why = "no Lloyd fixed point reached"
            rows += _rows(ds.name, k, {"why": why}, extra)
            continue
        a = analyse(
            X, path[-1], 30 if ctx.quick else 60, 200 if ctx.quick else 1000,
            n_hessians=3 if ctx.quick else N_HESSIANS,
        )  # fmt: skip
        results.append((k, a))
        rows += _rows(ds.name, k, a, extra)
    _figure(ds, results, ctx)
    return rows

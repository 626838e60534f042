"""Preconditioned gradient: the alternating-minimization step is
c_j+ = c_j - (1 / (2 N_j)) dF/dc_j, to float64 rounding, for softmax (F_sigma), entmax15
(G_sigma) and hard (J) assignments.

The identity c - (2 (N c - S)) / (2 N) = S / N holds for any row-stochastic r, related
to D or not, so it is one row (on IDENTITY_HOST, the first k, labelled "identity" and
counted apart: it pins the preconditioner 1 / (2 N_j)). The evidence, per (k,
assignment) at k-means++ centroids and sigma/sigma_c in {0.05, 0.3, 1, 3}, is what
makes the step a descent method of this objective: (a) the gradient is the objective's:
the central finite difference of the objective along a random unit direction U (step
h = 1e-4 min(sigma, sigma_c)) equals <g, U> to 1e-6 relative to ||g|| (skipped for
"hard": J is not differentiable where points tie); (b) the step c+ = c - g / (2N)
minimizes the r-fixed surrogate Q(c') = sum_ij r_ij ||x_i - c'_j||^2 with r the
responsibilities at c: the finite difference of Q at c+ along a random direction vanishes
(to 1e-6 of ||g||) and its second difference is positive; (c) the objective descends
monotonically along STEPS such steps (never up by more than 1e-11 relative). A
responsibility matrix unrelated to D fails (a) and (c).
"""

from __future__ import annotations

import numpy as np

import softkmeans as sk

from . import oracle as O
from ._common import FAIL, IDENTITY, IDENTITY_HOST, PASS, Row
from ._util import EPS, kpp, subsample

NUMBER = 4
TITLE = "Preconditioned gradient step"
STEP_TOL = 64 * EPS
FD_TOL = 1e-6
FRACTIONS = (0.05, 0.3, 1.0, 3.0)
PRECONDITIONER = 0.5  # c+ = c - PRECONDITIONER g / N (the claim: 1 / (2 N); tests plant others)
STEPS = 12  # preconditioned steps along which the objective must descend
DESCENT_RTOL = 1e-11  # the oracle's objective sums n terms: its rounding is far below this


def preconditioned_step(X, C, sigma, kind):
    """(c - PRECONDITIONER g / N, r): the claim's step from the oracle's gradient; an empty
    cluster (N = 0) keeps c."""
    r = O.responsibilities(O.sq_distances(X, C), sigma, kind)
    N = r.sum(axis=0)
    _, g = O.gradients(X, C, sigma, kind)
    live = N > np.finfo(np.float64).tiny
    out = np.array(C, dtype=np.float64, copy=True)
    out[live] = C[live] - PRECONDITIONER * g[live] / N[live][:, None]
    return out, r, g


def surrogate_error(X, C, sigma, kind, rng, h):
    """(|FD of Q at c+| / ||g||, second difference of Q at c+ > 0), Q the r-fixed surrogate."""
    new, r, g = preconditioned_step(X, C, sigma, kind)
    U = rng.standard_normal(C.shape)
    U /= np.linalg.norm(U)

    def Q(Cq):
        return float(np.sum(r * O.sq_distances(X, Cq)))

    q_plus, q_mid, q_minus = Q(new + h * U), Q(new), Q(new - h * U)
    fd = (q_plus - q_minus) / (2 * h)
    return abs(fd) / max(float(np.linalg.norm(g)), 1e-300), q_plus + q_minus - 2 * q_mid > 0


def descent_error(X, C, sigma, kind, steps=STEPS):
    """max over the path of (objective after a step - before) / |before| (<= 0: descent)."""
    worst, f = -np.inf, O.objective(X, C, sigma, kind=kind)
    for _ in range(steps):
        C = preconditioned_step(X, C, sigma, kind)[0]
        f_new = O.objective(X, C, sigma, kind=kind)
        worst = max(worst, (f_new - f) / max(abs(f), 1e-300))
        f = f_new
    return float(worst)


def step_error(X, C, sigma, kind):
    """max_j ||c+ - (c - g / (2N))||_inf / max(||c||_inf, ||c+||_inf) over non-empty clusters."""
    new_all, N = O.step(X, C, sigma, kind)
    _, grad_C = O.gradients(X, C, sigma, kind)
    live = N > np.finfo(np.float64).tiny
    pre = C[live] - grad_C[live] / (2.0 * N[live][:, None])
    new = new_all[live]
    scale = np.maximum(np.abs(C[live]).max(axis=1), np.abs(new).max(axis=1))
    scale = np.where(scale > 0, scale, 1.0)
    err = np.abs(new - pre).max(axis=1) / scale
    return float(err.max()) if err.size else 0.0, int((~live).sum())


def fd_error(X, C, sigma, kind, h, rng):
    """|FD directional derivative - <g, U>| / ||g|| along a random unit direction U."""
    _, grad_C = O.gradients(X, C, sigma, kind)
    U = rng.standard_normal(C.shape)
    U /= np.linalg.norm(U)
    f_plus = O.objective(X, C + h * U, sigma, kind=kind)
    f_minus = O.objective(X, C - h * U, sigma, kind=kind)
    fd = (f_plus - f_minus) / (2 * h)
    gnorm = float(np.linalg.norm(grad_C))
    return abs(fd - float(np.sum(grad_C * U))) / max(gnorm, 1e-300)


IMPL_RTOL = 1e-10


def implementation_check(X, C, sigmas):
    """max relative difference of the native step and gradient from the oracle's."""
    worst = 0.0
    for kind, grid in (("hard", [None]), ("softmax", sigmas), ("entmax15", sigmas)):
        for s in grid:
            want_c = O.step(X, C, s, kind)[0]
            got_c = sk.centroid_step(X, C, s, kind=kind).centroids
            want_g = O.gradients(X, C, s, kind)[1]
            got_g = sk.gradients(X, C, s, kind=kind)[1]
            for got, want in ((got_c, want_c), (got_g, want_g)):
                scale = max(float(np.abs(want).max()), 1e-300)
                worst = max(worst, float(np.abs(got - want).max()) / scale)
    return worst


def _identity_row(ds_name, X, C, k, sigmas, extra):
    errs = [step_error(X, C, s, kind) for kind in ("softmax", "entmax15") for s in sigmas]
    errs.append(step_error(X, C, None, "hard"))
    worst = max(e for e, _ in errs)
    return Row(
        NUMBER, ds_name, k, "identity: max |step - (c - dF/dc / (2N))| / |c| (3 kinds)",
        worst, STEP_TOL, PASS if worst <= STEP_TOL else FAIL,
        f"holds for any row-stochastic r (pins 1 / (2N) only); {worst / EPS:.1f} eps "
        f"(bound {STEP_TOL / EPS:.0f} eps)" + extra, role=IDENTITY,
    )  # fmt: skip


def _kind_rows(ds_name, k, X, C, kind, sigmas, sc, rng, extra):
    """The evidence rows of one assignment kind: gradient by FD, surrogate, descent."""
    obj = {"softmax": "F_sigma", "entmax15": "G_sigma", "hard": "J"}[kind]
    grid = sigmas if kind != "hard" else [None]
    rows = []
    if kind != "hard":
        fds = [fd_error(X, C, s, kind, 1e-4 * min(s, sc), rng) for s in sigmas]
        rows.append(Row(
            NUMBER, ds_name, k, f"{kind}: |finite difference of {obj} - <dF/dc, U>| / ||dF/dc||",
            max(fds), FD_TOL, PASS if max(fds) <= FD_TOL else FAIL,
            "per sigma: " + ", ".join(f"{e:.1e}" for e in fds) + extra,
        ))  # fmt: skip
    sur = [surrogate_error(X, C, s, kind, rng, 1e-3 * sc) for s in grid]
    worst = max(e for e, _ in sur)
    convex = all(c for _, c in sur)
    rows.append(Row(
        NUMBER, ds_name, k,
        f"{kind}: |finite difference at c - dF/dc / (2N) of the r-fixed surrogate| / ||dF/dc||",
        worst, FD_TOL, PASS if worst <= FD_TOL and convex else FAIL,
        "per sigma: " + ", ".join(f"{e:.1e}" for e, _ in sur)
        + ("" if convex else "; second difference not positive: not a minimum") + extra,
    ))  # fmt: skip
    desc = [descent_error(X, C, s, kind) for s in grid]
    rows.append(Row(
        NUMBER, ds_name, k, f"{kind}: max relative increase of {obj} along {STEPS} steps",
        max(desc), DESCENT_RTOL, PASS if max(desc) <= DESCENT_RTOL else FAIL,
        "per sigma: " + ", ".join(f"{e:.1e}" for e in desc) + extra,
    ))  # fmt: skip
    return rows


def run(ds, ks, ctx):
    X, sub_note = subsample(ds, ctx, 2000 if ctx.quick else 5000)
    sc = float(np.sqrt(O.covariance_top(X)))
    sigmas = [f * sc for f in FRACTIONS]
    extra = f"; sigma/sigma_c in {{{', '.join(f'{f:g}' for f in FRACTIONS)}}}, k-means++ C"
    if sub_note:
        extra += f"; {sub_note}"
    rows = []
    for k in ks:
        C = kpp(X, k, ctx, ds.name, k)
        rng = ctx.rng("claim4", ds.name, k)
        if ds.name == IDENTITY_HOST and k == ks[0]:
            rows.append(_identity_row(ds.name, X, C, k, sigmas, extra))
        for kind in ("softmax", "entmax15", "hard"):
            rows += _kind_rows(ds.name, k, X, C, kind, sigmas, sc, rng, extra)
        worst = implementation_check(X, C, sigmas)
        rows.append(
            Row(
                NUMBER,
                ds.name,
                k,
                "implementation check: native steps and dF/dc vs oracle (3 kinds)",
                worst,
                IMPL_RTOL,
                PASS if worst <= IMPL_RTOL else FAIL,
                "max relative difference over the sigma grid" + extra,
            )  # fmt: skip
        )
    return rows

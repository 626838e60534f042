"""Preconditioned gradient: the alternating-minimization step is
c_j+ = c_j - (1 / (2 N_j)) dF/dc_j, to float64 rounding, for softmax (F_sigma), entmax15
(G_sigma) and hard (J) assignments.

Two checks per (k, assignment), at k-means++ centroids and sigma/sigma_c in
{0.05, 0.3, 1, 3}. (a) Exactness: max_j ||c_j+ - (c_j - g_j / (2 N_j))||_inf /
max(||c_j||_inf, ||c_j+||_inf), with c+ and N from `centroid_step` and g from
`gradients`, must stay below 64 eps (a few roundings of c - (N c - S) / N). (b) The
gradient is the objective's: the central finite difference of the objective along a
random unit direction U (step h = 1e-4 min(sigma, sigma_c)) must equal <g, U> to 1e-6
relative to ||g||. (b) is skipped for "hard": J is not differentiable where points tie.
"""

from __future__ import annotations

import numpy as np

import softkmeans as sk

from . import oracle as O
from ._common import FAIL, PASS, Row
from ._util import EPS, kpp, subsample

NUMBER = 4
TITLE = "Preconditioned gradient step"
STEP_TOL = 64 * EPS
FD_TOL = 1e-6
FRACTIONS = (0.05, 0.3, 1.0, 3.0)


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


def run(ds, ks, ctx):
    X, sub_note = subsample(ds, ctx, 2000 if ctx.quick else 5000)
    sc = float(np.sqrt(O.covariance_top(X)))
    sigmas = [f * sc for f in FRACTIONS]
    extra = f"; sigma/sigma_c in {{{', '.join(f'{f:g}' for f in FRACTIONS)}}}, k-means++ C"
    hard_extra = "; k-means++ C"
    if sub_note:
        extra += f"; {sub_note}"
        hard_extra += f"; {sub_note}"
    rows = []
    for k in ks:
        C = kpp(X, k, ctx, ds.name, k)
        rng = ctx.rng("claim4", ds.name, k)
        for kind in ("softmax", "entmax15", "hard"):
            grid = sigmas if kind != "hard" else [None]
            errs = [step_error(X, C, s, kind) for s in grid]
            worst = max(e for e, _ in errs)
            empty = max(m for _, m in errs)
            obj = {"softmax": "F_sigma", "entmax15": "G_sigma", "hard": "J"}[kind]
            note = f"{worst / EPS:.1f} eps (bound {STEP_TOL / EPS:.0f} eps)"
            if empty:
                note += f"; {empty} empty cluster(s) skipped (N = 0: the step keeps c)"
            rows.append(
                Row(
                    NUMBER,
                    ds.name,
                    k,
                    f"{kind}: max |step - (c - dF/dc / (2N))| / |c| ({obj})",
                    worst,
                    STEP_TOL,
                    PASS if worst <= STEP_TOL else FAIL,
                    note + (extra if kind != "hard" else hard_extra),
                )
            )
            if kind == "hard":
                continue
            fds = [fd_error(X, C, s, kind, 1e-4 * min(s, sc), rng) for s in sigmas]
            worst_fd = max(fds)
            rows.append(
                Row(
                    NUMBER,
                    ds.name,
                    k,
                    f"{kind}: |finite difference of {obj} - <dF/dc, U>| / ||dF/dc||",
                    worst_fd,
                    FD_TOL,
                    PASS if worst_fd <= FD_TOL else FAIL,
                    "per sigma: " + ", ".join(f"{e:.1e}" for e in fds) + extra,
                )
            )
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

"""Experiment 9: the gradient with respect to the representations as sigma -> 0.

dF/dx_i = 2 (x_i - sum_j r_ij c_j) (SPEC.md, envelope theorem) stays bounded away from 0
and tends to the K-Means gradient K_i = 2 (x_i - c_a(i)); the part that flows only
through the responsibilities, d/dx sum_j r_ij(x) D_ij with D held fixed, vanishes. The
verdicts are the oracle's closed forms (float64 NumPy, `softkmeans.experiments.oracle`):
with z_ij = -D_ij / T, T = 2 sigma^2, and the Jacobian of the map z -> r,
diag(g) - g g^T / sum(g) with g = r for softmax and g = sqrt(r) for entmax15 (the entmax15
support is where r > 0),
    d/dx_i sum_j r_ij D_ij = -(2 / T) sum_l g_il (D_il - Dbar_i) (x_i - c_l),
    Dbar_i = sum_j g_ij D_ij / sum_j g_ij.
PyTorch's autograd through `softkmeans.torch` against these closed forms is a separate
"implementation check" row.
"""

from __future__ import annotations

import numpy as np

from . import oracle as O
from ._common import FAIL, IDENTITY, PASS, Row, pyplot
from ._torch_common import _rows, _skt, _table, _torch
from ._util import kpp, subsample

FULL_TOL = 0.5  # min ||dF/dx|| / ||K|| for sigma <= sigma_c / 10
LIMIT_TOL = 1e-8  # ||dF/dx - K|| / ||K|| at 1e-5 sigma_c
VIA_R_TOL = 1e-6  # through-r gradient at 1e-5 sigma_c / its peak
IMPL_RTOL = 1e-8  # autograd vs closed form (float64; relative to ||K||), or, colder:
# softkmeans.torch forms D as ||x||^2 + ||c||^2 - 2 x.c, whose rounding (a few eps D_max)
# the scores amplify by 1 / (2 sigma^2); at an exact tie the through-r gradient, 0 in exact
# arithmetic, is then the exact gradient at a point within that rounding (digits at
# 1e-5 sigma_c: 8e-8). The tolerance at sigma is max(IMPL_RTOL, 64 eps D_max / (2 sigma^2)).
EPS = float(np.finfo(np.float64).eps)
FD_TOL = 1e-6  # |FD of F along U in X - <dF/dX, U>| / ||dF/dX|| (central, h ~ 1e-4 sigma)
FD_RATIOS = (0.03, 0.3, 1.0)  # sigma / sigma_c of the FD: the leak is measurable, not Lloyd's


def envelope_fd_error(X, C, sigma, kind, rng):
    """|central FD of the oracle's objective along a random unit U in X - <dF/dX, U>| /
    ||dF/dX||: dF/dX = 2 (x_i - sum_j r_ij c_j) is the objective's derivative (the
    envelope theorem), checked against the objective itself."""
    g = full_gradient(X, C, sigma, kind)
    U = rng.standard_normal(X.shape)
    U /= np.linalg.norm(U)
    h = 1e-4 * sigma
    fp = O.objective(X + h * U, C, sigma, kind=kind)
    fm = O.objective(X - h * U, C, sigma, kind=kind)
    return abs((fp - fm) / (2 * h) - float(np.sum(g * U))) / max(float(np.linalg.norm(g)), 1e-300)


def full_gradient(X, C, sigma, kind):
    """The oracle's dF/dX = 2 (x_i - sum_j r_ij c_j)."""
    return O.gradients(X, C, sigma, kind)[0]


def through_r(X, C, sigma, kind):
    """The oracle's closed form of d/dX sum_ij r_ij(X) D_ij with D held fixed."""
    D = O.sq_distances(X, C)
    r = O.responsibilities(D, sigma, kind)
    g = r if kind == "softmax" else np.sqrt(r)
    dbar = (g * D).sum(axis=1) / g.sum(axis=1)
    w = g * (D - dbar[:, None])
    T = 2.0 * sigma * sigma
    return -(2.0 / T) * (w.sum(axis=1)[:, None] * X - w @ C)


def kmeans_gradient(X, C):
    """K = 2 (x - c_a), exact ties shared equally (the limit of both maps)."""
    D = O.sq_distances(X, C)
    nearest = D == D.min(axis=1, keepdims=True)
    return 2.0 * (X - (nearest / nearest.sum(axis=1, keepdims=True)) @ C)


def autograd(X, C, sigma, kind):
    """(dF/dX, through-r gradient) by PyTorch's autograd through softkmeans.torch."""
    torch, skt = _torch(), _skt()
    x = torch.tensor(X, requires_grad=True)
    skt.free_energy(x, torch.tensor(C), sigma, kind).backward()
    xr = torch.tensor(X, requires_grad=True)
    r = skt.responsibilities(xr, torch.tensor(C), sigma, kind)
    D = torch.cdist(xr.detach(), torch.tensor(C)).square()
    (r * D).sum().backward()
    return x.grad.numpy(), xr.grad.numpy()


def gradient_norm(ds, ctx):
    """dF/dx vs sigma over 6.5 decades at k-means++ centroids (k = 10, float64): the full
    gradient of F_sigma (softmax) and G_sigma (entmax15) with respect to the
    representations, relative to the K-Means gradient K = 2 (x_i - c_a(i)), and the part
    that flows only through the responsibilities (d/dx of sum_ij r_ij(x) D_ij with D held
    fixed), which is what a loss built on r alone back-propagates. Decided by the oracle's
    closed forms; autograd's agreement is an implementation check."""
    X, _ = subsample(ds, ctx, _rows(ctx))
    k = 10
    C = kpp(X, k, ctx, "torch9", ds.name)
    sc = float(np.sqrt(O.covariance_top(X)))
    K = kmeans_gradient(X, C)
    ratios = 10.0 ** np.arange(-5.0, 1.51, 0.5)
    body, rows, curves = [], [], {}
    for kind in ("softmax", "entmax15"):
        rng = ctx.rng("torch9fd", ds.name, kind)
        fds = [envelope_fd_error(X, C, f * sc, kind, rng) for f in FD_RATIOS]
        full, dev, via_r, impl = _sweep(X, C, K, sc, ratios, kind)
        body += [[kind, f"{f:.3g}", *values] for f, *values in zip(ratios, full, dev, via_r)]
        curves[kind] = (full, dev, via_r)
        rows += _kind_rows(ds.name, k, kind, ratios, curves[kind], impl, fds)
    _figure(ds, ctx, ratios, curves)
    head = ["kind", "sigma/sigma_c", "||dF/dx||/||K||", "||dF/dx-K||/||K||", "through r/||K||"]
    return rows, [_table(ctx, "torch9_gradient_norm", ds, head, body)]


def _sweep(X, C, K, sc, ratios, kind):
    """(||dF/dx||, ||dF/dx - K||, ||through-r gradient||, each / ||K|| per sigma / sigma_c
    in ratios, by the oracle's closed forms; impl: the largest autograd error over its
    tolerance)."""
    d_max = float(O.sq_distances(X, C).max())
    k_norm = float(np.linalg.norm(K))
    full, dev, via_r, impl = [], [], [], 0.0
    for f in ratios:
        sigma = f * sc
        g = full_gradient(X, C, sigma, kind)
        gr = through_r(X, C, sigma, kind)
        ag, agr = autograd(X, C, sigma, kind)
        err = float(np.linalg.norm(ag - g) + np.linalg.norm(agr - gr)) / k_norm
        tol = max(IMPL_RTOL, 64 * EPS * d_max / (2.0 * sigma * sigma))
        impl = max(impl, err / tol)
        full.append(float(np.linalg.norm(g)) / k_norm)
        dev.append(float(np.linalg.norm(g - K)) / k_norm)
        via_r.append(float(np.linalg.norm(gr)) / k_norm)
    return full, dev, via_r, impl


def _kind_rows(ds_name, k, kind, ratios, curves, impl, fds):
    """The rows of one kind: the full gradient bounded away from 0 when cold, the envelope
    formula against finite differences (fds at FD_RATIOS), the limit K (an identity), the
    through-r part vanishing, and autograd against the closed forms."""
    full, dev, via_r = curves
    lowest = min(np.array(full)[ratios <= 0.1])
    peak = max(via_r)
    cold = via_r[0] / peak if peak > 0 else 0.0
    return [
        Row(9, ds_name, k, f"oracle, {kind}: min ||dF/dx|| / ||K|| for sigma <= sigma_c / 10",
            lowest, FULL_TOL, PASS if lowest >= FULL_TOL else FAIL,
            f"K = 2 (x - c_a); sigma/sigma_c from {ratios[0]:g} to {ratios[-1]:g}"),
        Row(9, ds_name, k,
            f"oracle, {kind}: |finite difference of the objective along U in X - "
            "<dF/dX, U>| / ||dF/dX||", max(fds), FD_TOL,
            PASS if max(fds) <= FD_TOL else FAIL,
            "the envelope formula dF/dx = 2 (x - sum_j r_ij c_j) against the objective; "
            "per sigma/sigma_c " + ", ".join(f"{f:g}: {e:.1e}"
                                             for f, e in zip(FD_RATIOS, fds))),
        Row(9, ds_name, k, f"identity, {kind}: ||dF/dx - K|| / ||K|| at sigma = 1e-5 sigma_c",
            dev[0], LIMIT_TOL, PASS if dev[0] <= LIMIT_TOL else FAIL,
            "exact by construction (every leak underflows at 1e-5 sigma_c): pins the "
            "limit K = 2 (x - c_a) only", role=IDENTITY),
        Row(9, ds_name, k, f"oracle, {kind}: through-r gradient at 1e-5 sigma_c / its peak",
            cold, VIA_R_TOL, PASS if cold <= VIA_R_TOL else FAIL,
            f"peak {peak:.3g} ||K||; it vanishes as sigma -> 0"),
        Row(9, ds_name, k,
            f"implementation check, {kind}: autograd through softkmeans.torch vs closed forms",
            impl, 1.0, PASS if impl <= 1.0 else FAIL,
            "max over sigma of (||dF/dx error|| + ||through-r error||) / ||K|| over "
            "max(1e-8, 64 eps D_max / (2 sigma^2))"),
    ]  # fmt: skip


def _figure(ds, ctx, ratios, curves):
    plt = pyplot()
    path = ctx.figure_path(f"torch9_gradient_norm_{ds.name}")
    if plt is None or path is None:
        return
    floor = 1e-18
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for kind, style in (("softmax", "-"), ("entmax15", "--")):
        full, dev, via_r = curves[kind]
        ax.loglog(ratios, full, "C0" + style, label=f"||dF/dx|| / ||K|| ({kind})")
        ax.loglog(ratios, np.maximum(dev, floor), "C1" + style, label=f"||dF/dx - K|| ({kind})")
        ax.loglog(ratios, np.maximum(via_r, floor), "C2" + style, label=f"through r only ({kind})")
    ax.set_ylim(floor / 2, 10.0)
    ax.set_xlabel("sigma / sigma_c  (dimensionless)")
    ax.set_ylabel("norm relative to ||K|| = ||2 (x - c_a)||  (dimensionless)")
    ax.set_title(f"{ds.name}: gradient w.r.t. the representations (oracle)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)

"""Where the balanced repair starts (`softkmeans.fit.balanced_repair`): offsets, each
row's label there and a lower bound on its gap (its margin), from a pass at its own
offsets or from the pass's candidates at new offsets (Newton's); and the k x k solve of
the offsets' prediction from the last solve (`solve_spd`)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import _native

__all__ = ["Start", "candidates_start", "margin_bound", "pass_start", "rounding_slack",
           "solve_spd"]  # fmt: skip


def rounding_slack(p, g):
    """(n,) a bound on how far each row's computed gap may be from its exact gap at g
    (the pass subtracts g rounded to X's dtype, in X's dtype: a few units of roundoff of
    |D| + |g| on each of the two values)."""
    u = float(np.finfo(p.dist.dtype).eps)
    big = np.abs(p.dist).astype(np.float64) + 3.0 * float(np.abs(g).max(initial=0.0))
    return 8.0 * u * (big + p.gap.astype(np.float64)) + np.finfo(np.float64).tiny


class Start(NamedTuple):
    """Where the repair starts: offsets g (k,), each row's label at g, a lower bound on
    its exact gap there (margin, float64) and its D at the label (own, float64)."""

    g: np.ndarray
    labels: np.ndarray
    margin: np.ndarray
    own: np.ndarray


def pass_start(p, g):
    """The `Start` of the pass p at its offsets g."""
    margin = p.gap.astype(np.float64) - rounding_slack(p, g)
    return Start(g, p.labels, margin, p.dist.astype(np.float64))


def candidates_start(p, g, g_new, n_threads=1):
    """The `Start` at offsets g_new of the pass p at g: every row's best candidate, its
    margin the gap among its candidates and below the pass's floor at g (less its
    rounding) less the most any offset rose since (`_native.biased_row_margins`)."""
    labels, own, margin = _native.biased_row_margins(
        p.cand, p.cand_dist, g_new, *margin_bound(p.floor, g, g_new), n_threads
    )
    return Start(g_new, labels, margin, own)


def margin_bound(floor, g, g_new):
    """(floor or None, the six numbers of `_native.biased_row_margins`'s bound): the floor
    at g less a few units of |floor| + |g| in its dtype and the most an offset rose by
    g_new, the margin less a few float64 units of |own| + |g_new| + |gap|."""
    u, f64 = float(np.finfo(floor.dtype).eps), np.finfo(np.float64)
    rise, g_max, g_new_max = float((g_new - g).max()), np.abs(g).max(), np.abs(g_new).max()
    bound = (8.0 * u, 4.0 * g_max, rise, 8.0 * f64.eps, 3.0 * g_new_max, f64.tiny)
    return (floor if np.isfinite(floor).any() else None), tuple(map(float, bound))


def solve_spd(A, b):
    """x (k,) with A x = b for a symmetric positive definite A (k, k): Gaussian
    elimination without pivoting (stable on such an A) in elementwise NumPy operations
    only, so x has the same bits on every machine and BLAS (np.linalg.solve's LAPACK
    sums in the order of the BLAS kernel it dispatches to: the balanced fit's labels at
    1e6 rows differed in 336 rows between OpenBLAS's Haswell and SkylakeX kernels)."""
    A = np.array(A, dtype=np.float64)
    x = np.array(b, dtype=np.float64)
    k = x.size
    for j in range(k - 1):
        factor = A[j + 1 :, j] / A[j, j]
        A[j + 1 :, j:] -= factor[:, None] * A[j, j:][None, :]
        x[j + 1 :] -= factor * x[j]
    for j in range(k - 1, -1, -1):
        x[j] /= A[j, j]
        x[:j] -= A[:j, j] * x[j]
    return x

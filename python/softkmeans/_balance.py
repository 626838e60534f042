"""The targets of a balanced fit (SPEC.md, "Balanced (size-constrained) assignments"):
`balance` (masses m_j, two-sided) or `max_cluster_size` (capacities u_j, one-sided),
checked once against k, the number of rows n and the total weight W.

Shared by the NumPy reference and the native path (no `_core` here), so that both read
the same targets and raise the same errors.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from . import _validation as v

__all__ = ["MASS_RTOL", "Targets", "biased_argmin", "biased_labels", "check_targets",
           "integer_targets"]  # fmt: skip

# Masses must sum to W within this relative tolerance; they are then rescaled to sum to
# W exactly (a user's masses are decimals: 0.3 W + 0.7 W is not W in binary).
MASS_RTOL = 1e-6


class Targets(NamedTuple):
    """masses (k,) float64 summing to W (two-sided: N_j = m_j), or capacities (k,)
    float64 with sum >= W (one-sided: N_j <= u_j); exactly one is not None."""

    masses: np.ndarray | None
    capacities: np.ndarray | None

    @property
    def one_sided(self):
        return self.capacities is not None

    @property
    def bounds(self):
        return self.masses if self.masses is not None else self.capacities


def _per_cluster(value, k, name):
    arr = np.asarray(value)
    if arr.dtype.kind not in "iuf" or arr.dtype == np.bool_:
        raise TypeError(f"{name} must be real numbers; got dtype {arr.dtype}")
    if arr.ndim == 0:
        arr = np.full(k, float(arr))
    arr = arr.astype(np.float64)
    if arr.shape != (k,):
        raise ValueError(f"{name} must have n_clusters={k} entries; got shape {arr.shape}")
    if not np.isfinite(arr).all() or (arr <= 0).any():
        raise ValueError(f"{name} must be finite and > 0 for every cluster; got {arr}")
    return arr


def check_targets(balance, max_cluster_size, k, n, W, unit_weights):
    """The `Targets` of a fit with k clusters of n rows of total weight W, or None
    (neither given). Raises ValueError/TypeError naming the parameter.

    balance: None, "equal" (m_j = W / k) or (k,) masses > 0 summing to W (relative
    tolerance MASS_RTOL). max_cluster_size: None, one number for every cluster or (k,);
    with unit weights each is a count (floored) and their sum must reach n.
    """
    if balance is not None and max_cluster_size is not None:
        raise ValueError(
            "give balance or max_cluster_size, not both (masses already fix every cluster's size)"
        )
    if balance is not None:
        if isinstance(balance, str):
            if balance != "equal":
                raise ValueError(f"balance must be None, 'equal' or (k,) masses; got {balance!r}")
            return Targets(np.full(k, W / k), None)
        masses = _per_cluster(balance, k, "balance")
        total = float(masses.sum())
        if abs(total - W) > MASS_RTOL * W:
            raise ValueError(
                f"balance masses must sum to the total sample weight W={W:g} (relative "
                f"tolerance {MASS_RTOL:g}); they sum to {total:g}"
            )
        return Targets(masses * (W / total), None)
    if max_cluster_size is None:
        return None
    if isinstance(max_cluster_size, (bool, np.bool_)):
        raise TypeError("max_cluster_size must be a number or (k,) numbers; got a bool")
    caps = _per_cluster(max_cluster_size, k, "max_cluster_size")
    room = float(np.floor(caps).sum()) if unit_weights else float(caps.sum())
    if room < (n if unit_weights else W):
        what = f"n={n} rows" if unit_weights else f"the total sample weight W={W:g}"
        raise ValueError(
            f"max_cluster_size allows {room:g} in all, below {what} (at least "
            f"{(n if unit_weights else W) / k:g} per cluster on average): infeasible"
        )
    return Targets(None, np.floor(caps) if unit_weights else caps)


def integer_targets(masses, n):
    """Counts t_j (k,) int64 summing to n, each floor(m_j) or floor(m_j) + 1: the
    n - sum floor(m) extra rows go to the largest fractional parts (ties: smaller j).
    With unit weights a hard balanced fit holds these counts exactly."""
    floor = np.floor(masses + 1e-9 * np.maximum(masses, 1.0))
    extra = int(round(n - floor.sum()))
    frac = masses - floor
    order = np.argsort(-frac, kind="stable")
    t = floor.astype(np.int64)
    t[order[:extra]] += 1
    return t


def check_balance_kind(kind, anneal):
    """balance / max_cluster_size run with "hard" or "softmax", without annealing."""
    v.check_kind(kind)
    if kind == "entmax15":
        raise ValueError(
            "balance / max_cluster_size need assignment='hard' or 'softmax' (the entropic "
            "transport of SPEC.md is Shannon's); got 'entmax15'"
        )
    if anneal is not None and anneal is not False:
        raise ValueError("balance / max_cluster_size do not anneal yet; use anneal=None")


def _biased(D, g):
    """v = D - g~ (D's dtype), g~ the offsets g (k,) rounded to D's dtype once."""
    D = np.asarray(D)
    return D - np.asarray(g, dtype=np.float64).astype(D.dtype)


def biased_labels(D, g):
    """`biased_argmin`'s labels alone (no second smallest: a partition of every row)."""
    return np.argmin(_biased(D, g), axis=1)


def biased_argmin(D, g):
    """(labels (n,) int64, gap (n,)) of distances D (n, k) at offsets g (k,) float64, in
    D's dtype (SPEC.md, "Balanced assignments as one pass"): v = D - g~ with g~ = g
    rounded to D's dtype once, labels = argmin_j v_ij (ties to the smallest j), gap = the
    second smallest of v_i less the smallest (0 when tied; inf when k = 1). The NumPy
    definition of the native fused pass (`_native.biased_hard_stats`), which equals it bit
    for bit on the kernel's D."""
    v = _biased(D, g)
    labels = np.argmin(v, axis=1)
    if v.shape[1] == 1:
        return labels, np.full(v.shape[0], np.inf, dtype=v.dtype)
    two = np.partition(v, 1, axis=1)[:, :2]
    return labels, two[:, 1] - two[:, 0]

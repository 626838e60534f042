"""The CSR k-means++ passes skip a distance where a lower bound from the norm expansion
proves it above the row's closest distance (issue 36, item 11): their outputs keep the
bits of the walk over the union of the two rows' columns. Oracle: that walk in Python,
in the kernels' precision, on rows made for exact ties (TF-IDF rows sharing no term,
duplicates), one chunk of rows so the potentials are sums in row order."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from softkmeans import _native


def _rows(dtype, seed=0, n=200, d=40):
    rng = np.random.default_rng(seed)
    dense = np.zeros((n, d))
    for i in range(n):
        cols = rng.choice(d, size=rng.integers(1, 6), replace=False)
        dense[i, cols] = rng.integers(1, 4, size=cols.size)  # small integers: many ties
    dense[::7] = dense[3]  # duplicated rows
    dense /= np.linalg.norm(dense, axis=1, keepdims=True)
    X = sp.csr_matrix(dense.astype(dtype))
    X.sort_indices()
    return X


def _walk(X, a, b, U):
    """||x_a - x_b||^2 by differences over the union of the columns in order, in U."""
    ra = dict(zip(X.indices[X.indptr[a] : X.indptr[a + 1]], X.data[X.indptr[a] : X.indptr[a + 1]]))
    rb = dict(zip(X.indices[X.indptr[b] : X.indptr[b + 1]], X.data[X.indptr[b] : X.indptr[b + 1]]))
    s = U(0)
    for j in sorted(set(ra) | set(rb)):
        if j in ra and j in rb:
            df = U(U(ra[j]) - U(rb[j]))
        elif j in ra:
            df = U(ra[j])
        else:
            df = U(U(0) - U(rb[j]))
        s = U(s + U(df * df))
    return float(s)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_filtered_passes_keep_the_bits_of_the_walk(dtype):
    X = _rows(dtype)
    n = X.shape[0]
    w = np.random.default_rng(1).uniform(0.5, 2.0, n)
    closest = np.full(n, np.inf)
    for center in (3, 10, 57, 120):  # the update: distances in double
        expected = np.minimum(closest, [_walk(X, i, center, np.float64) for i in range(n)])
        _native.kmeanspp_update_closest(X, closest, center, 1)
        np.testing.assert_array_equal(closest, expected)
        cand = np.array([center + 1, 5, 3, 150, 199], dtype=np.int64)  # 3: a chosen row
        expected_pots = np.zeros(cand.size)
        for a, c in enumerate(cand):  # the potentials: distances in X's dtype
            for i in range(n):
                expected_pots[a] += w[i] * min(_walk(X, i, c, dtype), closest[i])
        pots = _native.kmeanspp_candidate_potentials(X, w, closest, cand, 1)
        np.testing.assert_array_equal(pots, expected_pots)

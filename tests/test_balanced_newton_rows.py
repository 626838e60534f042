"""The row states of the balanced Newton start (`_native.balanced_newton`, SPEC.md
"Balanced assignments as one pass"): each row's best candidate at the offsets (ties to
the smaller column), D there and the gap to the second best value, the same at every
SIMD level (one row a vector at avx512 with 8 candidates, one at a time otherwise).

Oracle: the definition in NumPy on the candidates at the offsets Newton returns, on
inputs built with ties (equal values in a row, equal offsets) and short rows (-1 past
the last candidate).
"""

import numpy as np
import pytest

from conftest import DTYPES, THREAD_COUNTS
from softkmeans import _native


def _candidates(n, m, k, dtype, seed):
    """(cand (n, m) int32 with -1 tails, dist (n, m) with repeated values, targets)."""
    rng = np.random.default_rng(seed)
    cand = np.argsort(rng.random((n, k)), axis=1)[:, :m].astype(np.int32)
    held = rng.integers(1, m + 1, n)
    held[: n // 2] = m  # most rows full
    cand[np.arange(m)[None, :] >= held[:, None]] = -1
    dist = rng.integers(0, 6, (n, m)).astype(dtype)  # few values: ties within rows
    targets = np.full(k, n // k, dtype=np.int64)
    targets[: n - targets.sum()] += 1
    return cand, dist, targets


def _definition(cand, dist, g):
    """(labels, own, gap) of each row among its candidates at g, in float64."""
    held = cand >= 0
    v = np.where(held, dist.astype(np.float64) - g[np.maximum(cand, 0)], np.inf)
    best = v.min(axis=1)
    tied = (v == best[:, None]) & held
    labels = np.where(tied, cand, np.iinfo(np.int32).max).min(axis=1)
    lane = np.argmax(tied & (cand == labels[:, None]), axis=1)
    own = dist[np.arange(len(cand)), lane].astype(np.float64)
    rest = v.copy()
    rest[np.arange(len(cand)), lane] = np.inf
    return labels, own, rest.min(axis=1) - best


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m", [8, 5])
@pytest.mark.parametrize("steps", [0, 6])
def test_newton_row_states_are_their_definition_at_every_level(dtype, m, steps, simd_level):
    # steps = 0: the states at the start offsets, whose equal entries tie columns
    k = 12
    cand, dist, targets = _candidates(3000, m, k, dtype, seed=m)
    g0 = np.zeros(k)
    g0[[2, 5]] = 1.0
    err, g, labels, own, gap, _ = _native.balanced_newton(cand, dist, targets, g0, steps, 0)
    want_labels, want_own, want_gap = _definition(cand, dist, g)
    assert np.array_equal(labels, want_labels)
    assert np.array_equal(own, want_own)
    assert np.array_equal(gap, want_gap)
    assert err == int(np.abs(np.bincount(labels, minlength=k) - targets).sum())


@pytest.mark.parametrize("dtype", DTYPES)
def test_newton_is_the_same_at_every_level(dtype):
    cand, dist, targets = _candidates(5000, 8, 16, dtype, seed=3)
    dist = dist + np.random.default_rng(4).random(dist.shape).astype(dtype)  # few ties
    before = _native.selected_simd_level()
    outs = []
    try:
        for level in _native.available_simd_levels():
            _native.set_simd_level(level)
            outs.append(_native.balanced_newton(cand, dist, targets, np.zeros(16), 10, 0))
    finally:
        _native.set_simd_level(before)
    for out in outs[1:]:
        assert out[0] == outs[0][0] and out[5] == outs[0][5]
        for a, b in zip(out[1:5], outs[0][1:5]):
            assert np.array_equal(a, b)


@pytest.mark.parametrize("dtype", DTYPES)
def test_newton_on_rows_by_index_is_newton_on_those_rows_at_every_thread_count(dtype):
    # 70,000 rows: several chunks of the sweeps, so the threads split them
    n, k = 70_000, 16
    cand, dist, _ = _candidates(n, 8, k, dtype, seed=5)
    dist = dist + np.random.default_rng(6).random(dist.shape).astype(dtype)
    rows = np.flatnonzero(np.random.default_rng(7).random(n) < 0.8)
    # unequal counts: large residuals, so each band is a high order statistic (its
    # rows spread over the chunks and threads)
    targets = (rows.size * np.arange(1, k + 1) / (k * (k + 1) / 2)).astype(np.int64)
    targets[-1] += rows.size - targets.sum()
    want = _native.balanced_newton(cand[rows], dist[rows], targets, np.zeros(k), 10, 0)
    assert want[5] > 2  # some steps taken
    for n_threads in THREAD_COUNTS:
        got = _native.balanced_newton(cand, dist, targets, np.zeros(k), 10, 0, rows, n_threads)
        assert got[0] == want[0] and got[5] == want[5]
        for a, b in zip(got[1:5], want[1:5]):
            assert np.array_equal(a, b)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("k", [12, 100])
def test_newton_sweeps_are_the_same_at_every_level_and_thread_count(dtype, k):
    # Eight candidates a row (the avx512 sweeps take eight rows a vector, the scalar ones
    # the rest: 40,003 rows leave a tail, and fill several chunks for the threads), ties
    # and short rows, k <= 64 (columns looked up in registers) and k > 64 (gathered),
    # unequal targets (large residuals: many offers to each band). Oracle: the scalar
    # sweeps, one row at a time.
    n = 40_003
    cand, dist, _ = _candidates(n, 8, k, dtype, seed=k)
    dist = dist + (np.random.default_rng(k).integers(0, 4, dist.shape) / 4).astype(dtype)
    targets = (n * np.arange(1, k + 1) / (k * (k + 1) / 2)).astype(np.int64)
    targets[-1] += n - targets.sum()
    g0 = np.zeros(k)
    g0[::3] = 0.5  # equal offsets: ties between columns
    before = _native.selected_simd_level()
    outs = []
    try:
        for level in _native.available_simd_levels():
            _native.set_simd_level(level)
            for n_threads in THREAD_COUNTS:
                outs.append(_native.balanced_newton(cand, dist, targets, g0, 8, 0, None, n_threads))
    finally:
        _native.set_simd_level(before)
    assert outs[0][5] > 4  # steps taken
    for out in outs[1:]:
        assert out[0] == outs[0][0] and out[5] == outs[0][5]
        for a, b in zip(out[1:5], outs[0][1:5]):
            assert np.array_equal(a, b)


@pytest.mark.parametrize("dtype", DTYPES)
def test_newton_on_every_column_is_the_same_at_every_thread_count(dtype):
    # The presolve's call (a sample's distances to every centroid, on the source's
    # threads): the scalar sweeps of 64 columns a row, in chunks of fixed size.
    n, k = 40_003, 64
    rng = np.random.default_rng(5)
    dist = (rng.random((n, k)) * 4).astype(dtype)
    every = np.ascontiguousarray(np.broadcast_to(np.arange(k, dtype=np.int32), (n, k)))
    targets = (n * np.arange(1, k + 1) / (k * (k + 1) / 2)).astype(np.int64)
    targets[-1] += n - targets.sum()
    g0 = np.zeros(k)
    g0[::3] = 0.5  # equal offsets: ties between columns
    outs = [_native.balanced_newton(every, dist, targets, g0, 8, 0, None, t)
            for t in THREAD_COUNTS]  # fmt: skip
    assert outs[0][5] > 4 and outs[0][0] < n // 10  # steps taken, toward the counts
    for out in outs[1:]:
        assert out[0] == outs[0][0] and out[5] == outs[0][5]
        for a, b in zip(out[1:5], outs[0][1:5]):
            assert np.array_equal(a, b)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m", [8, 5, 1])
@pytest.mark.parametrize("k", [12, 100])
def test_row_states_of_every_row_are_their_definition(dtype, m, k, simd_level):
    # `biased_row_states` (every row's state at given offsets, what the pair-started
    # Newton reads after each call): 40,000 rows, several chunks of fixed size, ties
    # within rows and between equal offsets, at every SIMD level and thread count; the
    # offsets held in registers (k <= 64) or gathered.
    cand, dist, _ = _candidates(40_000, m, k, dtype, seed=10 + m)
    g = np.random.default_rng(m).integers(-2, 3, k).astype(np.float64)
    g[[3, 7]] = g[1]
    want = _definition(cand, dist, g)
    for n_threads in THREAD_COUNTS:
        got = _native.biased_row_states(cand, dist, g, n_threads)
        assert got[0].dtype == np.int64
        for a, b in zip(got, want):
            assert np.array_equal(a, b)


def test_row_states_refuse_a_column_outside_the_clusters():
    cand, dist, _ = _candidates(10, 3, 4, np.float64, seed=0)
    cand[4, 1] = 4
    with pytest.raises(ValueError, match="column outside"):
        _native.biased_row_states(cand, dist, np.zeros(4))
    with pytest.raises(TypeError, match="cand"):
        _native.biased_row_states(cand.astype(np.int64), dist, np.zeros(4))


@pytest.mark.parametrize("where, value", [((4, 1), 4), ((4, 1), -2), ((4, 0), -1),
                                          ((9, 2), np.iinfo(np.int32).max),
                                          ((0, 2), np.iinfo(np.int32).min)])  # fmt: skip
def test_candidates_outside_the_clusters_are_refused_wherever_they_are(where, value):
    # The binding's check reads every entry of the rows read (as one reduction): a column
    # past k, below -1, or -1 first, at any place; a row not read may hold anything.
    cand, dist, targets = _candidates(10, 3, 4, np.float64, seed=0)
    cand[:, 0] = np.maximum(cand[:, 0], 0)
    good = cand.copy()
    _native.biased_row_states(good, dist, np.zeros(4))
    cand[where] = value
    with pytest.raises(ValueError, match="column outside"):
        _native.biased_row_states(cand, dist, np.zeros(4))
    with pytest.raises(ValueError, match="column outside"):
        _native.balanced_newton(cand, dist, targets, np.zeros(4), 1)
    others = np.array([r for r in range(10) if r != where[0]], dtype=np.int64)
    _native.balanced_newton(cand, dist, targets, np.zeros(4), 1, 0, others)
    for rows in ([where[0]], [10], [-1]):
        with pytest.raises(ValueError, match="outside"):
            _native.balanced_newton(cand, dist, targets, np.zeros(4), 1, 0,
                                    np.array(rows, dtype=np.int64))  # fmt: skip


def _margins_in_numpy(cand, dist, floor, g, g_new):
    """The margins of `balanced_start.candidates_start` as they were computed in NumPy
    before `biased_row_margins` (the row states at g_new, the pass's floor at g less its
    rounding and the most an offset rose, then the margin's own rounding)."""
    labels, own, gap = _definition(cand, dist, g_new)
    if floor is not None:
        u = float(np.finfo(floor.dtype).eps)
        f = floor.astype(np.float64)
        f -= 8.0 * u * (np.abs(f) + 4.0 * np.abs(g).max())
        f -= float((g_new - g).max()) - g_new[labels]
        f -= own
        np.minimum(gap, f, out=gap)
    u = float(np.finfo(np.float64).eps)
    finite = np.where(np.isfinite(gap), np.abs(gap), 0.0)
    margin = gap - 8.0 * u * (np.abs(own) + 3.0 * np.abs(g_new).max() + finite)
    margin -= np.finfo(np.float64).tiny
    return labels, own, margin


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m", [8, 1])
@pytest.mark.parametrize("bounded", [True, False])
def test_row_margins_are_the_numpy_bound_bit_for_bit(dtype, m, bounded, simd_level):
    # `biased_row_margins` fuses the margin's bound into the row states (it was NumPy
    # over every row, 27 ms a call at 1e6): the same bits as that NumPy, with and
    # without the pass's floor, rows of one candidate (an inf gap) and ties, at every
    # SIMD level and thread count.
    from softkmeans.fit.balanced_start import margin_bound

    k = 12
    cand, dist, _ = _candidates(40_000, m, k, dtype, seed=20 + m)
    rng = np.random.default_rng(m)
    g = rng.normal(0, 3, k)
    g_new = g + rng.normal(0, 0.5, k)
    floor = (dist.max(axis=1) + rng.random(len(cand)).astype(dtype)) if bounded else None
    want = _margins_in_numpy(cand, dist, floor, g, g_new)
    floor_arg = floor if bounded else np.full(len(cand), np.inf, dtype=dtype)
    for n_threads in THREAD_COUNTS:
        got = _native.biased_row_margins(cand, dist, g_new, *margin_bound(floor_arg, g, g_new),
                                         n_threads)  # fmt: skip
        assert got[0].dtype == np.int64
        for a, b in zip(got, want):
            assert np.array_equal(a, b)
    assert np.isinf(want[2]).any() == (not bounded)  # rows of one candidate: the floor bounds them

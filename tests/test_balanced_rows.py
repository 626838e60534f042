"""The repair's sets of rows (softkmeans.fit.balanced_rows) against their definitions
written as scans: np.unique of the concatenated sets, and each cluster's rows picked
one cluster at a time with a boolean mask."""

import numpy as np
import pytest

from softkmeans import _native
from softkmeans.fit import balanced_rows


@pytest.mark.parametrize("n, sizes", [(1000, (3, 0, 5)), (1000, (400, 700)), (50, (50, 50))])
def test_sorted_union_is_unique_of_the_sets(n, sizes):
    rng = np.random.default_rng(n + sum(sizes))
    parts = [np.sort(rng.choice(n, size=s, replace=False)) for s in sizes]
    got = balanced_rows.sorted_union(n, *parts)
    want = np.unique(np.concatenate(parts))
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, want)


def _with_leavers_by_scan(boundary, keys, margin, leave):
    """For each group j, its leave_j rows of least margin, ties to the smaller row: a
    stable sort of each group's margins, one group at a time."""
    rows = [boundary]
    for j in np.flatnonzero(leave):
        mine = np.flatnonzero(keys == j)
        rows.append(mine[np.argsort(margin[mine], kind="stable")[: leave[j]]])
    return np.unique(np.concatenate(rows))


@pytest.mark.parametrize("n, k", [(2000, 7), (300, 40)])
def test_with_leavers_takes_each_clusters_least_margins(n, k):
    rng = np.random.default_rng(k)
    labels = rng.integers(0, k, size=n)
    margin = rng.integers(-25, 25, size=n).astype(np.float64)  # ties: the row order decides
    boundary = np.sort(rng.choice(n, size=n // 10, replace=False))
    leave = np.where(rng.random(k) < 0.5, rng.integers(1, 3 * n // k, size=k), 0)
    got = balanced_rows.with_leavers(boundary, labels, margin, leave)
    np.testing.assert_array_equal(got, _with_leavers_by_scan(boundary, labels, margin, leave))
    for j in np.flatnonzero(leave):  # and what it is for: leave_j rows of j free to move
        assert np.isin(np.flatnonzero(labels == j), got).sum() >= min(leave[j], (labels == j).sum())


@pytest.mark.parametrize("n, k", [(2000, 7), (300, 40)])
def test_joiners_are_each_short_clusters_rows_of_least_margin_among_those_next_to_it(n, k):
    # The repair's joiners of a short cluster j: rows whose second candidate is j (-1:
    # a row of one candidate, next to none), those of least margin, by a scan.
    rng = np.random.default_rng(k + 1)
    second = rng.integers(-1, k, size=n)
    margin = rng.integers(-25, 25, size=n).astype(np.float64)
    boundary = np.sort(rng.choice(n, size=n // 10, replace=False))
    join = np.where(rng.random(k) < 0.5, rng.integers(1, 3 * n // k, size=k), 0)
    join[0] = 5  # (a row of none is never cluster 0's)
    got = balanced_rows.with_leavers(boundary, second, margin, join)
    np.testing.assert_array_equal(got, _with_leavers_by_scan(boundary, second, margin, join))
    assert not np.isin(np.flatnonzero(second == -1), np.setdiff1d(got, boundary)).any()


def test_least_margin_rows_counts_nan_as_inf_and_checks_its_input():
    # the order: -inf (row 3), 2 (rows 1, 4), then inf and NaN alike by row (0, 2, 5)
    margin = np.array([np.nan, 2.0, np.inf, -np.inf, 2.0, np.nan])
    none = np.empty(0, dtype=np.int64)
    for take, want in [(1, [3]), (2, [1, 3]), (3, [1, 3, 4]), (4, [0, 1, 3, 4]), (6, range(6))]:
        mask = _native.least_margin_rows(none, None, margin, np.array([take]))
        np.testing.assert_array_equal(np.flatnonzero(mask), want)
    keys = np.array([0, 0, 1, 1, 5, -1])  # 5, -1: no group of 2
    mask = _native.least_margin_rows(np.array([5]), keys, margin, np.array([1, 9]))
    np.testing.assert_array_equal(np.flatnonzero(mask), [1, 2, 3, 5])
    with pytest.raises(ValueError, match="rows must lie"):
        _native.least_margin_rows(np.array([6]), None, margin, np.array([1]))
    with pytest.raises(ValueError, match="one entry a row"):
        _native.least_margin_rows(none, keys[:3], margin, np.array([1, 1]))
    with pytest.raises(ValueError, match="one entry when keys is None"):
        _native.least_margin_rows(none, None, margin, np.array([1, 1]))
    with pytest.raises(TypeError, match="margin"):
        _native.least_margin_rows(none, None, margin.astype(np.float32), np.array([1]))


def test_boundary_rows_are_the_band_within_the_wanted_and_the_most():
    margin = np.array([5.0, 0.5, 3.0, 0.1, 9.0, 2.0, 7.0, 0.2, 8.0, 6.0])
    band = np.full(10, 1.0)
    # within the band: 3 rows, between want 2 and most 4
    np.testing.assert_array_equal(balanced_rows.boundary_rows(margin, band, 2, 4, False), [1, 3, 7])
    # fewer than want: the 4 of least margin; more than most: the 2 of least margin
    rows = balanced_rows.boundary_rows
    np.testing.assert_array_equal(rows(margin, band, 4, 8, False), [1, 3, 5, 7])
    np.testing.assert_array_equal(rows(margin, band, 1, 2, False), [3, 7])
    # asked for every row, or half of them wanted
    assert balanced_rows.boundary_rows(margin, band, 1, 2, True).size == 10
    assert balanced_rows.boundary_rows(margin, band, 5, 8, False).size == 10


@pytest.mark.parametrize("layout", ["random", "ties", "sample-misleads"])
@pytest.mark.parametrize("take", [1, 37, 5000, 49_999, 99_999])
def test_least_margin_rows_of_every_row_are_a_stable_sorts_first(layout, take):
    # Every row one group (keys None): the take rows of least margin, ties to the smaller
    # row, against a stable sort; "sample-misleads" puts large margins on the rows the
    # selection samples (every n/4096-th) so that its bracket misses.
    n = 100_000
    rng = np.random.default_rng(take)
    margin = rng.standard_normal(n) if layout == "random" else rng.integers(0, 9, n) * 1.0
    if layout == "sample-misleads":
        margin[np.arange(4096) * n // 4096] = 100.0
    rows = np.sort(rng.choice(n, size=50, replace=False))
    mask = _native.least_margin_rows(rows, None, margin, np.array([take]))
    want = np.union1d(rows, np.argsort(margin, kind="stable")[:take])
    np.testing.assert_array_equal(np.flatnonzero(mask), want)

"""Issue 24, item 5: the bounded hard step (`cpp/src/impl/bounded.hpp`) at the shapes where
the engine takes the bf16 candidate pass (float32, d >= 64, k >= 512, k d >= 65536) gives
the same bits with the pass on and off, and the plain pass's: labels, N and S at every
step, the bounds it carries (so the same distances are skipped), and the exact final
pass's J and least margin. The data are integer-valued rows and centroids: half of the
centroids duplicated, so that ties and near ties (where the bf16 bound decides) are
everywhere; or distinct centroids with rows on or next to them, where each row's second
smallest distance is far above its smallest (a pass that lost it would show in the least
margin). Skipped where the CPU lacks AVX512_BF16."""

from __future__ import annotations

import numpy as np
import pytest

from softkmeans import _native
from softkmeans.centroid_groups import principal_axis_groups

pytestmark = pytest.mark.skipif(
    not _native.bf16_available(), reason="the CPU (or build) has no AVX512_BF16"
)


@pytest.fixture
def bf16_level():
    """The avx512 level (the pass's), the switch and the level restored after the test."""
    level, on = _native.selected_simd_level(), _native.bf16_enabled()
    _native.set_simd_level("avx512")
    yield _native.set_bf16_enabled
    _native.set_simd_level(level)
    _native.set_bf16_enabled(on)


def _integer_near_ties(n, d, k, seed):
    """Centroids with small integer coordinates, each of the first k / 2 twice; rows a
    centroid plus -1, 0 or 1 in each coordinate: many rows equidistant from several
    centroids, and every centroid's twin at distance 0 from it."""
    rng = np.random.default_rng(seed)
    half = rng.integers(-3, 4, size=(k // 2, d))
    C = np.vstack([half, half, rng.integers(-3, 4, size=(k - 2 * (k // 2), d))])
    C = C[rng.permutation(k)].astype(np.float32)
    X = C[rng.integers(0, k, size=n)] + rng.integers(-1, 2, size=(n, d))
    return X.astype(np.float32), C


def _integer_separated(n, d, k, seed):
    """Distinct centroids with integer coordinates in [-3, 3]; each row a centroid, half
    of them moved by 1 in one coordinate."""
    rng = np.random.default_rng(seed)
    C = rng.integers(-3, 4, size=(k, d)).astype(np.float32)
    X = C[rng.integers(0, k, size=n)]
    moved = rng.random(n) < 0.5
    X[moved, rng.integers(0, d, size=int(moved.sum()))] += 1
    return X, C


DATA = {"near-tie": _integer_near_ties, "separated": _integer_separated}


def _step(X, C, C_prev, state, group, threads, exact=False):
    labels, lower = state
    stats, _, n_distances = _native.hard_stats_bounded(
        X, C, C_prev, np.ones(X.shape[0]), labels, lower, group, threads, exact=exact
    )
    return stats, n_distances


def _plain(X, C, threads):
    return _native.block_stats(X, C, "hard", 1.0, np.ones(X.shape[0]), threads, labels=True)


def _check_trajectory(X, C, t, threads, steps, bf16):
    n = X.shape[0]
    group = principal_axis_groups(C, t)
    on = (np.zeros(n, np.int64), np.zeros((n, group.max() + 1)))
    off = (np.zeros(n, np.int64), np.zeros((n, group.max() + 1)))
    C_prev = None
    for step in range(steps + 1):
        exact = step == steps  # the fit's final pass
        bf16(True)
        got, n_on = _step(X, C, C_prev, on, group, threads, exact)
        plain_on, plain_on_labels, _ = _plain(X, C, threads)
        bf16(False)
        want, n_off = _step(X, C, C_prev, off, group, threads, exact)
        plain, plain_labels, _ = _plain(X, C, threads)
        for labels, what in ((on[0], "on"), (off[0], "off"), (plain_on_labels, "plain on")):
            np.testing.assert_array_equal(labels, plain_labels, err_msg=f"labels {what}")
        for stats in (got, want, plain_on):
            np.testing.assert_array_equal(stats.cluster_weights, plain.cluster_weights)
            np.testing.assert_array_equal(stats.sums, plain.sums)
        np.testing.assert_array_equal(on[1], off[1], err_msg="bounds")
        assert n_on == n_off
        if exact:
            for stats in (got, want, plain_on):
                assert stats.distortion == plain.distortion
                assert stats.min_margin == plain.min_margin
        held = plain.cluster_weights > 0
        C_next = C.copy()
        C_next[held] = (plain.sums[held] / plain.cluster_weights[held, None]).astype(np.float32)
        C_prev, C = C, C_next
    return n_on / (n * C.shape[0])


@pytest.mark.parametrize("data", sorted(DATA))
@pytest.mark.parametrize("threads", (1, 2))
@pytest.mark.parametrize("t", (4, 8, 64))
def test_bounded_steps_are_bitwise_with_and_without_bf16(t, threads, data, bf16_level):
    X, C = DATA[data](1200, 64, 1024, seed=t)
    last = _check_trajectory(X, C, t, threads, steps=3, bf16=bf16_level)
    assert last < 1.0  # the final pass skipped distances: the bounds were used


def test_bounded_steps_at_k_4096_are_bitwise_with_and_without_bf16(bf16_level):
    X, C = _integer_near_ties(700, 64, 4096, seed=5)
    _check_trajectory(X, C, 64, 2, steps=2, bf16=bf16_level)

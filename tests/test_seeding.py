"""softkmeans.kmeans_plusplus: greedy k-means++ like scikit-learn's, weights respected."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.cluster import kmeans_plusplus as sk_kmeans_plusplus
from sklearn.datasets import load_digits, make_blobs

import softkmeans
from softkmeans import kmeans_plusplus


def _potential(X, C, w=None):
    w = np.ones(X.shape[0]) if w is None else w
    return float(w @ softkmeans.reference.assign(X, C)[1].astype(np.float64))


def test_returns_rows_of_X_and_their_indices():
    X, _ = make_blobs(200, n_features=3, centers=5, random_state=0)
    centers, idx = kmeans_plusplus(X, 5, random_state=0)
    assert centers.shape == (5, 3) and idx.shape == (5,) and idx.dtype == np.int64
    np.testing.assert_array_equal(X[idx], centers)
    assert np.unique(idx).size == 5


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dtype_is_kept(dtype):
    X = np.random.default_rng(0).normal(size=(50, 2)).astype(dtype)
    centers, _ = kmeans_plusplus(X, 4, random_state=0)
    assert centers.dtype == dtype


def test_same_draws_as_scikit_learn():
    # Same RandomState, same order of draws: the same points (no near-ties on digits).
    X = load_digits().data
    for seed in range(3):
        _, ours = kmeans_plusplus(X, 10, random_state=seed)
        _, theirs = sk_kmeans_plusplus(X, 10, random_state=seed)
        np.testing.assert_array_equal(ours, theirs)


def test_quality_within_two_percent_of_scikit_learn():
    # Mean potential after seeding over seeds, on data where the draws will diverge
    # (different n_local_trials streams are not compared point by point).
    X, _ = make_blobs(3000, n_features=8, centers=40, cluster_std=2.0, random_state=1)
    ours = np.mean([_potential(X, kmeans_plusplus(X, 40, random_state=s)[0]) for s in range(8)])
    theirs = np.mean(
        [_potential(X, sk_kmeans_plusplus(X, 40, random_state=100 + s)[0]) for s in range(8)]
    )
    assert ours <= 1.02 * theirs


def test_greedy_beats_single_trial_on_average():
    X, _ = make_blobs(1000, n_features=2, centers=30, random_state=2)
    greedy = np.mean([_potential(X, kmeans_plusplus(X, 30, random_state=s)[0]) for s in range(6)])
    plain = np.mean(
        [
            _potential(X, kmeans_plusplus(X, 30, random_state=s, n_local_trials=1)[0])
            for s in range(6)
        ]
    )
    assert greedy < plain


def test_zero_weight_points_are_never_chosen():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(300, 2))
    w = np.zeros(300)
    w[::3] = rng.integers(1, 4, size=100)
    # Make the zero-weight points the most attractive ones if weights were ignored.
    X[w == 0] *= 50
    for seed in range(10):
        _, idx = kmeans_plusplus(X, 20, sample_weight=w, random_state=seed)
        assert (w[idx] > 0).all()


def test_integer_weights_equal_repeated_rows():
    # The draws search the cumulative sums; a repeated row occupies the same interval
    # as one row with the summed weight, so the same points are chosen.
    rng = np.random.default_rng(4)
    X = rng.normal(size=(40, 3))
    w = rng.integers(1, 4, size=40)
    Xr = np.repeat(X, w, axis=0)
    for seed in range(5):
        c1, _ = kmeans_plusplus(X, 6, sample_weight=w.astype(float), random_state=seed)
        c2, _ = kmeans_plusplus(Xr, 6, random_state=seed)
        np.testing.assert_allclose(c1, c2)


def test_all_points_identical_does_not_fail():
    X = np.ones((10, 2))
    centers, idx = kmeans_plusplus(X, 3, random_state=0)
    np.testing.assert_array_equal(centers, np.ones((3, 2)))


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        (dict(n_clusters=0), ValueError, "n_clusters must be >= 1"),
        (dict(n_clusters=11), ValueError, "n_samples=10 should be >= n_clusters=11"),
        (dict(n_clusters=2.0), TypeError, "n_clusters must be an int"),
        (dict(n_clusters=2, n_local_trials=0), ValueError, "n_local_trials"),
        (dict(n_clusters=2, sample_weight=-np.ones(10)), ValueError, "non-negative"),
        (dict(n_clusters=2, random_state="x"), ValueError, "random_state"),
    ],
)
def test_bad_arguments(kwargs, exc, match):
    X = np.arange(20.0).reshape(10, 2)
    with pytest.raises(exc, match=match):
        kmeans_plusplus(X, **kwargs)


@pytest.mark.parametrize("n_features", [4, 8])
def test_fused_native_kernels_equal_the_numpy_path(monkeypatch, n_features):
    """The seeding through the fused kernels picks what NumPy versions of them pick: with
    the update as a pass of its own (d = 4) and from the kept candidates' distances (d = 8:
    2 L <= d for L = 2 + ln 10 = 4)."""
    from softkmeans import _native

    X, _ = make_blobs(500, n_features=n_features, centers=10, random_state=3)
    w = np.random.default_rng(0).uniform(0.1, 2.0, size=500)
    fused = kmeans_plusplus(X, 10, sample_weight=w, random_state=0)[1]

    def potentials(X, w, closest, cand, n_threads, dist=None):
        D = ((X[:, None, :] - X[cand][None, :, :]) ** 2).sum(axis=2)
        if dist is not None:
            dist[...] = D.T
        return w @ np.minimum(D, closest[:, None])

    def update_closest(X, closest, center, n_threads):
        np.minimum(closest, ((X - X[center]) ** 2).sum(axis=1), out=closest)

    monkeypatch.setattr(_native, "kmeanspp_candidate_potentials", potentials)
    monkeypatch.setattr(_native, "kmeanspp_update_closest", update_closest)
    plain = kmeans_plusplus(X, 10, sample_weight=w, random_state=0)[1]
    np.testing.assert_array_equal(fused, plain)


def test_two_level_draw_equals_a_search_in_the_full_cumulative_sum():
    from softkmeans.fit import seeding as _seeding

    rng = np.random.default_rng(5)
    for n in (1, 7, _seeding._BLOCK, 3 * _seeding._BLOCK + 17):
        # Small integers: every partial sum is exact, so both searches must agree.
        weighted = rng.integers(0, 4, size=n).astype(np.float64)
        weighted[rng.random(n) < 0.3] = 0.0
        if not weighted.any():
            weighted[-1] = 1.0
        cum = np.cumsum(weighted)
        r = np.concatenate([rng.uniform(size=50) * cum[-1], cum[:20] - 0.0, [0.0]])
        r = r[r < cum[-1]]
        expected = np.searchsorted(cum, r, side="right")
        np.testing.assert_array_equal(_seeding._draw(weighted, r), expected)
        assert (weighted[_seeding._draw(weighted, r)] > 0).all()
        # At or beyond the total (rounding): the last point with a positive increment.
        last = np.flatnonzero(weighted > 0)[-1]
        np.testing.assert_array_equal(_seeding._draw(weighted, np.array([cum[-1]])), [last])


def test_kept_distances_only_for_an_array_in_memory(tmp_path):
    """The candidates' distances are kept for an in-memory X, not for a memory-mapped one
    (they would be anonymous memory of half the file's size); both seed alike."""
    from softkmeans.fit.seeding import SeedingPasses
    from softkmeans.sources import ArraySource, dense

    X, _ = make_blobs(2000, n_features=8, centers=10, random_state=4)
    X = X.astype(np.float32)
    mm = np.memmap(tmp_path / "x.f32", dtype=np.float32, mode="w+", shape=X.shape)
    mm[:] = X
    assert dense.file_backed(mm) and dense.file_backed(np.asarray(mm)[10:])
    assert not dense.file_backed(X) and not dense.file_backed(X[10:])
    kept = {}
    for name, data in (("memory", X), ("file", mm)):
        passes = SeedingPasses(ArraySource(data))
        closest = np.full(len(X), np.inf)
        passes.update_closest(closest, 0)
        passes.candidate_potentials(closest, np.array([3, 5, 7], dtype=np.int64))
        kept[name] = passes._dist is not None
    assert kept == {"memory": True, "file": False}
    np.testing.assert_array_equal(
        kmeans_plusplus(mm, 10, random_state=0)[1], kmeans_plusplus(X, 10, random_state=0)[1]
    )


def test_seeds_over_blocks_equal_those_over_the_whole_array(monkeypatch):
    """k-means++ read in row blocks stacked on the centres (a Fortran-ordered X, in chunks
    inside its blocks) or from a CSR matrix picks the rows it picks over the in-memory
    array: small integers make every distance and potential exact, whatever the order of
    the sums, so only a block that reads the wrong rows' state can differ."""
    from scipy import sparse

    from softkmeans import sources
    from softkmeans.fit import seeding
    from softkmeans.sources import dense

    rng = np.random.default_rng(7)
    X = rng.integers(-8, 9, size=(3000, 6)).astype(np.float64)
    w = rng.integers(1, 4, size=3000).astype(np.float64)
    monkeypatch.setattr(dense, "ROW_BLOCK_BYTES", 1 << 14)  # 341 rows a block
    monkeypatch.setattr(seeding, "CHUNK_BYTES", 1 << 11)  # 42-row chunks inside them

    def seeds(source):
        return seeding.greedy_kmeans_plusplus(source, 12, np.random.RandomState(0))[1]

    whole = seeds(sources.source_of(X, w))
    blocks = sources.source_of(np.asfortranarray(X), w)
    assert sources.kernel_array(blocks) is None and len(list(blocks.blocks())) == 9
    np.testing.assert_array_equal(seeds(blocks), whole)
    np.testing.assert_array_equal(seeds(sources.source_of(sparse.csr_matrix(X), w)), whole)

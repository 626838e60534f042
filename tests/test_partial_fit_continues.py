"""partial_fit after fit continues from the fitted model, revives dead centroids, and
SoftKMeans("auto").partial_fit reports its k (issue 36, items 7, 8 and 14)."""

from __future__ import annotations

import numpy as np
import pytest

from softkmeans import SoftKMeans

CENTRES = np.array([[0.0, 0.0], [6.0, 0.0], [0.0, 6.0]])


def _blobs(rng, m):
    return CENTRES[rng.integers(0, 3, m)] + 0.5 * rng.normal(size=(m, 2))


def test_partial_fit_after_fit_steps_from_the_fitted_centroids():
    rng = np.random.default_rng(0)
    X, batch = _blobs(rng, 3000), _blobs(rng, 40)
    m = SoftKMeans(3, assignment="hard", random_state=0).fit(X)
    C = m.cluster_centers_.copy()
    m.partial_fit(batch)
    # By hand (SPEC.md, "Streaming", stream_memory="sqrt"): T_j the fitted clusters'
    # sizes, M_j = sqrt(T_j) + N_j(batch), c_j += (S_j - N_j c_j) / M_j.
    T = np.bincount(((X[:, None, :] - C[None]) ** 2).sum(-1).argmin(1), minlength=3)
    lab = ((batch[:, None, :] - C[None]) ** 2).sum(-1).argmin(1)
    N = np.bincount(lab, minlength=3).astype(float)
    S = np.stack([batch[lab == j].sum(axis=0) for j in range(3)])
    expected = C + (S - N[:, None] * C) / (np.sqrt(T) + N)[:, None]
    np.testing.assert_allclose(m.cluster_centers_, expected, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(m.cluster_weights_, T + N)
    assert m.n_steps_ == 1


def test_a_stream_after_fit_leaves_untouched_clusters_where_the_fit_put_them():
    rng = np.random.default_rng(1)
    X = _blobs(rng, 3000)
    m = SoftKMeans(3, assignment="hard", random_state=0).fit(X)
    C = m.cluster_centers_.copy()
    near_origin = np.argmin(np.linalg.norm(C, axis=1))
    m.partial_fit(0.5 * rng.normal(size=(30, 2)))  # rows of the blob at the origin only
    others = np.arange(3) != near_origin
    np.testing.assert_array_equal(m.cluster_centers_[others], C[others])  # main: re-seeded


def _dead_start_stream(seed, kind="hard", n_batches=30):
    rng = np.random.default_rng(100)
    init = np.array([[0.0, 0.0], [5.0, 0.0], [100.0, 100.0]])
    m = SoftKMeans(3, assignment=kind, init=init, n_init=1, random_state=seed)
    for _ in range(n_batches):
        m.partial_fit(_blobs(rng, 60))
    return m


@pytest.mark.parametrize("kind", ["hard", "softmax"])
def test_a_dead_centroid_is_revived_onto_the_uncovered_blob(kind):
    m = _dead_start_stream(0, kind)
    C = m.cluster_centers_
    # Each blob has a centroid within 0.3 of its centre (main: one stays at (100, 100)).
    nearest = np.linalg.norm(CENTRES[:, None, :] - C[None], axis=2).min(axis=1)
    assert (nearest < 0.3).all(), C
    assert m.cluster_weights_.min() > 0.1 * m.cluster_weights_.max()


def test_revival_is_deterministic_for_a_seed():
    a, b = _dead_start_stream(7, n_batches=5), _dead_start_stream(7, n_batches=5)
    np.testing.assert_array_equal(a.cluster_centers_, b.cluster_centers_)


def test_a_live_small_cluster_is_not_revived():
    # A blob of 2 % of the rows, fed by every batch, keeps its centroid and its counts
    # (a revival would reset its seen weight to the live minimum and its memory to 0).
    rng = np.random.default_rng(3)
    m = SoftKMeans(2, assignment="hard", init=np.array([[0.0, 0.0], [20.0, 0.0]]), n_init=1)
    for _ in range(20):
        big = 0.5 * rng.normal(size=(98, 2))
        small = np.array([20.0, 0.0]) + 0.5 * rng.normal(size=(2, 2))
        m.partial_fit(np.vstack([big, small]))
    np.testing.assert_array_equal(m.cluster_weights_, [20 * 98, 20 * 2])


def test_auto_partial_fit_reports_its_k():
    rng = np.random.default_rng(2)
    m = SoftKMeans("auto", assignment="hard", random_state=0).partial_fit(_blobs(rng, 600))
    assert m.n_clusters_ == 3 == m.cluster_centers_.shape[0]  # main: no n_clusters_
    assert m.phase_diagram_.n_clusters == 3
    m.partial_fit(_blobs(rng, 60))
    assert m.n_clusters_ == 3

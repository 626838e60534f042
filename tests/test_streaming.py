"""Streams that reach the batch solution (issue 26, SPEC.md "Streaming"): the default
memory, sqrt(T_j) of the weight seen plus the batch, reaches the full-batch inertia from
the same init within 1 % after 5 passes where the running mean (stream_memory="all",
MiniBatchKMeans's rule) stays above it; ``decay`` forgets for a drifting stream."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import make_blobs

import softkmeans
from conftest import shuffled_batches
from softkmeans import SoftKMeans, reference
from softkmeans.fit.params import InvalidParameterError


def _stream_over_full(X, k, **params):
    C0, _ = softkmeans.kmeans_plusplus(X, k, random_state=0)
    full = SoftKMeans(k, assignment="hard", init=C0, tol=0, max_iter=300).fit(X)
    model = SoftKMeans(k, assignment="hard", init=C0, **params)
    for batch in shuffled_batches(X, batch=1024):
        model.partial_fit(batch)
    return softkmeans.objective(X, model.cluster_centers_, kind="hard") / full.inertia_


# (d, k, cluster_std): separated and overlapping blobs, 5e4 rows, 5 passes of 1,024-row
# batches. The running mean ends at 1.0039, 1.0163, 1.0000 and 1.0527 x the full fit.
CONFIGS = [(2, 8, 1.5), (8, 64, 3.0), (64, 16, 6.0), (2, 64, 1.0)]


@pytest.mark.parametrize(("d", "k", "std"), CONFIGS)
def test_the_stream_reaches_the_batch_inertia_within_one_percent(d, k, std):
    X, _ = make_blobs(50_000, n_features=d, centers=k, cluster_std=std, random_state=0)
    assert _stream_over_full(X.astype(np.float32), k) <= 1.01


def test_the_running_mean_stops_short_where_the_default_does_not():
    X, _ = make_blobs(50_000, n_features=2, centers=64, cluster_std=1.0, random_state=0)
    assert _stream_over_full(X.astype(np.float32), 64, stream_memory="all") > 1.04


def test_the_memory_is_bounded_by_the_square_root_of_the_weight_seen():
    """Three batches by hand (independent NumPy reference): M_j = min(M_j, sqrt(T_j)) +
    N_j(batch), c_j += (S_j - N_j c_j) / M_j, T_j the weight seen."""
    X, _ = make_blobs(900, n_features=3, centers=4, random_state=1)
    w = np.random.default_rng(0).uniform(0.5, 2.0, size=900)
    C = X[[0, 100, 200, 300]].copy()
    model = SoftKMeans(4, assignment="softmax", init=C, sigma=0.7)
    T = M = np.zeros(4)
    for rows in (slice(0, 300), slice(300, 600), slice(600, 900)):
        model.partial_fit(X[rows], sample_weight=w[rows])
        R = reference.responsibilities(X[rows], C, 0.7, kind="softmax") * w[rows, None]
        N, S = R.sum(axis=0), R.T @ X[rows]
        M = np.minimum(M, np.sqrt(T)) + N
        T = T + N
        C = C + (S - N[:, None] * C) / M[:, None]
        np.testing.assert_allclose(model.cluster_centers_, C, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(model.cluster_weights_, T, rtol=1e-12)
    assert np.all(np.sqrt(T) < 0.5 * T)  # the bound was active


def _drifting(n_batches=200, batch=500, seed=0):
    """Four blobs whose centres move 10 units (10 x their std) over the stream."""
    rng = np.random.default_rng(seed)
    start = np.array([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0], [10.0, 10.0]])
    for t in range(n_batches):
        centres = start + 0.05 * t * np.array([1.0, 0.5])
        labels = rng.integers(0, 4, batch)
        yield centres, centres[labels] + rng.normal(size=(batch, 2))


@pytest.mark.parametrize(
    ("params", "tracks"),
    [
        ({"stream_memory": "all"}, False),
        ({"stream_memory": "all", "decay": 0.2}, True),
        ({"decay": 0.2}, True),
    ],
)
def test_decay_tracks_a_drifting_stream(params, tracks):
    start = np.array([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0], [10.0, 10.0]])
    model = SoftKMeans(4, assignment="hard", init=start, **params)
    centres = None
    for centres_now, X in _drifting():
        model.partial_fit(X)
        centres = centres_now
    error = np.abs(model.cluster_centers_ - centres).max()
    assert (error < 0.3) if tracks else (error > 3.0)


def test_decay_one_keeps_only_the_last_batch():
    X, _ = make_blobs(400, n_features=2, centers=3, random_state=2)
    C = X[:3].copy()
    model = SoftKMeans(3, assignment="hard", init=C, decay=1.0).partial_fit(X[:200])
    C1 = model.cluster_centers_.copy()
    model.partial_fit(X[200:])
    step = reference.centroid_step(X[200:], C1, 1.0, kind="hard")
    np.testing.assert_allclose(model.cluster_centers_, step.centroids, rtol=1e-12)


@pytest.mark.parametrize(
    ("name", "value"),
    [("stream_memory", "none"), ("stream_memory", None), ("decay", 1.5), ("decay", -0.1),
     ("decay", "0.1"), ("decay", True), ("decay", float("nan"))],
)  # fmt: skip
def test_bad_stream_parameters(name, value):
    X = np.random.default_rng(0).normal(size=(50, 2))
    with pytest.raises(InvalidParameterError, match=f"The '{name}' parameter of SoftKMeans"):
        SoftKMeans(3, **{name: value}).partial_fit(X)

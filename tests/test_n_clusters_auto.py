"""n_clusters="auto" (issue 36, item 3): the same k for every seed, 1 on a single blob,
never n_samples, a choice at max_clusters said, and a k whose persistence is no
measurement never chosen over one that is."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from sklearn.datasets import make_blobs

from softkmeans import SoftKMeans
from softkmeans.fit.phase_diagram import Recorder


def _auto_k(X, seed, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return SoftKMeans("auto", assignment="hard", random_state=seed, **kwargs).fit(X).n_clusters_


def _three_blobs():
    centres = [[0.0, 0.0], [10.0, 0.0], [0.0, 10.0]]
    return make_blobs(300, centers=centres, cluster_std=1.0, random_state=0)[0]


@pytest.mark.parametrize(
    "name, X, expected",
    [
        ("three well-separated blobs", _three_blobs(), 3),
        # Four blobs 2.9 to 7.7 sds apart: on main seeds 0-9 gave 4,4,4,4,3,4,2,3,4,4.
        ("make_blobs(1000, centers=4)", make_blobs(1000, centers=4, random_state=0)[0], None),
    ],
)
def test_the_choice_does_not_depend_on_the_seed(name, X, expected):
    ks = {_auto_k(X, seed) for seed in range(10)}
    assert len(ks) == 1, f"{name}: {sorted(ks)}"
    if expected is not None:
        assert ks == {expected}


@pytest.mark.parametrize("d", [2, 5])
def test_a_single_gaussian_blob_is_one_cluster(d):
    X = np.random.default_rng(d).normal(size=(500, d))
    m = SoftKMeans("auto", assignment="hard", random_state=0).fit(X)
    assert m.n_clusters_ == 1 == m.cluster_centers_.shape[0]
    np.testing.assert_allclose(m.cluster_centers_[0], X.mean(axis=0), atol=1e-12)


def test_the_choice_stays_below_n_samples():
    # On main: k = n = 5 (every point its own cluster, "persisting" to the coldest width).
    X = np.random.default_rng(0).normal(size=(5, 2))
    assert _auto_k(X, 0, max_clusters=10) < 5


def test_a_choice_at_max_clusters_is_said():
    rng = np.random.default_rng(1)
    X = np.vstack([rng.normal(size=(200, 2)), rng.normal(size=(200, 2)) + 12.0])
    with pytest.warns(UserWarning, match="max_clusters=2, the top of its range"):
        m = SoftKMeans("auto", max_clusters=2, random_state=0).fit(X)
    assert m.n_clusters_ == 2 and m.phase_diagram_.at_max
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m = SoftKMeans("auto", max_clusters=5, random_state=0).fit(X)
    assert m.n_clusters_ == 2 and not m.phase_diagram_.at_max


def _recorded(widths, refused_at=None):
    """A Recorder fed (sigma, distinct count) by hand: each count n as n points 10 apart."""
    rec = Recorder(merge=0.25)
    for i, (sigma, n) in enumerate(widths):
        C = 10.0 * np.arange(n, dtype=np.float64)[:, None]
        rec(sigma, C, 0.0, blocked=i == refused_at)
    return rec


def test_a_k_counted_after_a_refused_split_never_beats_a_measured_one():
    # 2 appears at 8 and 3 at 4 (persistence log 2, measured); at width 2 a split is
    # refused for want of centroids, and 4 appears only at 0.25: 3's span of log 16 is
    # no measurement (with a free centroid 4 could have appeared at 2).
    widths = [(16.0, 1), (8.0, 2), (4.0, 3), (2.0, 3), (1.0, 3), (0.5, 3), (0.25, 4)]
    pd = _recorded(widths, refused_at=3).diagram(2, 10, 16.0, n_samples=100)
    assert pd.unmeasured == 3
    assert pd.suggested == 2 and pd.n_clusters == 2
    assert pd.persistence[2] == pytest.approx(math.log(2.0))
    # The same widths with no refused split: 3 is measured and wins.
    assert _recorded(widths).diagram(2, 10, 16.0, n_samples=100).suggested == 3


def test_k_equal_to_n_samples_is_never_suggested():
    # 5 samples: 5 appears at 0.8 and runs to the last width, log 80 (it cannot split);
    # the measured ones: 2 log(4/3), 3 log 3, 4 log 1.25.
    widths = [(8.0, 1), (4.0, 2), (3.0, 3), (1.0, 4), (0.8, 5), (0.01, 5)]
    pd = _recorded(widths).diagram(2, 10, 8.0, n_samples=5)
    assert pd.censored == 5 and pd.suggested == 3 == pd.n_clusters

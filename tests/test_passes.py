"""How many times one fit reads X: counted by wrapping every entry point of the trusted
native layer (`softkmeans._native`) and the data validation (`softkmeans.sources.dense.
check_values`).

A fit validates X once (the same pass gives the features' variances: the tolerance),
computes one weighted covariance only where it needs lambda_max (a soft kind with
sigma=None, annealing; a hard fit none, and no eigenvalue), seeds (k-means++: one
`kmeanspp_candidate_potentials` per centre after the first, and one
`kmeanspp_update_closest` for the first centre, or per centre where the candidates'
distances are not kept), makes one `block_stats` pass per iteration (a hard fit of an
in-memory X with d > 4: one `hard_stats_bounded` pass, which reads only the rows whose
label may change, see tests/test_bounded.py), and one final `block_stats` pass at the
final centroids that yields the labels, inertia, objective and minimum margin. Nothing
else touches X.
"""

from __future__ import annotations

import collections

import numpy as np
import pytest
from sklearn.datasets import make_blobs

from softkmeans import SoftKMeans, _native, _stats
from softkmeans.sources import dense

PASSES_OVER_X = (
    "sq_distances",
    "assign",
    "margins",
    "responsibilities",
    "block_stats",
    "hard_stats_bounded",
    "weighted_covariance",
    "kmeanspp_candidate_potentials",
    "kmeanspp_update_closest",
)


@pytest.fixture
def counted(monkeypatch):
    """Counts of calls into _native (by name) and into check_data, while the test runs."""
    counts = collections.Counter()

    def wrap(name, f):
        def counting(*args, **kwargs):
            counts[name] += 1
            return f(*args, **kwargs)

        return counting

    for name in PASSES_OVER_X:
        monkeypatch.setattr(_native, name, wrap(name, getattr(_native, name)))
    monkeypatch.setattr(dense, "check_values", wrap("check_data", dense.check_values))
    monkeypatch.setattr(_stats, "lambda_max", wrap("lambda_max", _stats.lambda_max))
    return counts


def _data(dtype):
    X, _ = make_blobs(3000, n_features=5, centers=6, cluster_std=2.0, random_state=0)
    return X.astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kind", ["hard", "softmax", "entmax15"])
def test_a_fit_from_given_centroids_reads_x_once_per_iteration(monkeypatch, counted, kind, dtype):
    from softkmeans.fit.bounded import BoundedHardPass

    monkeypatch.setattr(BoundedHardPass, "MIN_CENTROID_BYTES", 0)  # bounds at this small k d
    X = _data(dtype)
    init = X[:6].copy()
    # sigma=None pinned: the default softmax width is re-estimated since issue 36 item 12.
    m = SoftKMeans(6, assignment=kind, sigma=None, init=init, n_init=1, max_iter=50,
                   random_state=0)  # fmt: skip
    m.fit(X)
    assert m.n_iter_ >= 2
    assert counted["check_data"] == 1
    # lambda_max only where sigma=None needs it: the soft kinds here, never a hard fit.
    covariances = 0 if kind == "hard" else 1
    assert counted["weighted_covariance"] == counted["lambda_max"] == covariances
    steps = counted["block_stats"] + counted["hard_stats_bounded"]
    assert steps == m.n_iter_ + 1  # + the final pass
    assert counted["hard_stats_bounded"] == (m.n_iter_ if kind == "hard" else 0)
    others = sum(counted[name] for name in PASSES_OVER_X) - m.n_iter_ - 1 - covariances
    assert others == 0, dict(counted)
    # critical_sigma_ of a hard fit: computed on first read, once.
    assert m.critical_sigma_ == pytest.approx(m.critical_sigma_)
    assert counted["weighted_covariance"] == counted["lambda_max"] == 1


@pytest.mark.parametrize("k", [1, 6])
@pytest.mark.parametrize("d", [5, 8])
def test_kmeans_plusplus_seeding_passes_per_centre(counted, k, d):
    """One candidate pass per centre after the first. The closest distances are updated
    from the chosen candidate's kept distances where those take at most half of X's memory
    (2 L <= d for L = 2 + ln k candidates: d = 8 here), else by a pass of their own (d = 5);
    the first centre always takes one."""
    X, _ = make_blobs(3000, n_features=d, centers=6, cluster_std=2.0, random_state=0)
    m = SoftKMeans(k, assignment="hard", n_init=1, max_iter=50, random_state=0).fit(X)
    updates = 1 if 2 * (2 + int(np.log(k))) <= d else k
    assert counted["kmeanspp_update_closest"] == updates
    assert counted["kmeanspp_candidate_potentials"] == k - 1
    assert counted["block_stats"] + counted["hard_stats_bounded"] == m.n_iter_ + 1
    assert counted["weighted_covariance"] == counted["lambda_max"] == 0  # a hard fit
    assert counted["check_data"] == 1
    assert sum(counted[name] for name in PASSES_OVER_X) == updates + k - 1 + m.n_iter_ + 1


def test_the_final_pass_reports_what_separate_passes_would(counted):
    """The fitted labels, inertia, objective and margin equal the public functions' values."""
    import softkmeans

    X = _data(np.float64)
    m = SoftKMeans(6, assignment="softmax", init=X[:6].copy(), max_iter=30).fit(X)
    C = m.cluster_centers_
    np.testing.assert_array_equal(m.labels_, softkmeans.assign(X, C)[0])
    assert m.inertia_ == pytest.approx(softkmeans.objective(X, C, kind="hard"), rel=1e-12)
    assert m.objective_ == pytest.approx(
        softkmeans.objective(X, C, m.sigma_, kind="softmax"), rel=1e-12
    )
    assert m.min_margin_ == pytest.approx(float(softkmeans.margins(X, C).min()), rel=1e-12)

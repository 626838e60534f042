"""predict groups the fitted centroids for the pruned pass once (issue 24, item 2): the
groups are kept with the estimator and made again whenever ``cluster_centers_`` changes
(a refit, partial_fit, centroids set or changed in place by the user), so that a
prediction never uses the groups of other centroids. Labels are checked against the
NumPy argmin of the float64 distances; the groupings are counted at `ball_groups`.

Shapes are small: the pruned pass is switched on from 64 centroids (d = 8 > SMALL_DIM).
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from softkmeans import SoftKMeans
from softkmeans.sources import nearest


def _argmin(X, C):
    return ((X[:, None, :] - np.asarray(C, np.float64)[None]) ** 2).sum(axis=2).argmin(axis=1)


@pytest.fixture
def groupings(monkeypatch):
    """The centroid sets grouped for the pruned pass (their k), in order."""
    monkeypatch.setattr(nearest.NearestCentroid, "MIN_CENTROIDS", 64)
    made = []
    ball_groups = nearest.ball_groups

    def counted(C, t, **kwargs):
        made.append(C.shape[0])
        return ball_groups(C, t, **kwargs)

    monkeypatch.setattr(nearest, "ball_groups", counted)
    return made


def _data(n=2000, d=8, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, d)) + 6.0 * rng.integers(0, 4, size=(n, d))


def _fitted(k, X):
    return SoftKMeans(k, assignment="hard", init="random", max_iter=3, random_state=0).fit(X)


def test_two_predicts_group_the_centroids_once(groupings):
    X = _data()
    model = _fitted(64, X)
    del groupings[:]  # the fit's own passes are not predictions
    first, second = model.predict(X), model.predict(X[:500])
    assert groupings == [64]
    np.testing.assert_array_equal(first, _argmin(X, model.cluster_centers_))
    np.testing.assert_array_equal(second, first[:500])
    model.transform(X[:10]), model.predict_proba(X[:10])  # no groups for these
    assert groupings == [64]
    # A pickled model makes its groups again (they are not pickled).
    again = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(again.predict(X), first)
    assert groupings == [64, 64]


@pytest.mark.parametrize(
    "change", ["refit_other_k", "set_other_k", "set_same_k", "in_place", "partial_fit"]
)
def test_predict_after_the_centroids_change_uses_their_groups(groupings, change):
    X = _data()
    model = _fitted(64, X)
    model.predict(X)
    del groupings[:]
    rng = np.random.default_rng(1)
    if change == "refit_other_k":
        model.set_params(n_clusters=80).fit(X)
        del groupings[:]
    elif change == "set_other_k":
        model.cluster_centers_ = X[rng.choice(len(X), 72, replace=False)]
    elif change == "set_same_k":
        model.cluster_centers_ = X[rng.choice(len(X), 64, replace=False)]
    elif change == "in_place":
        model.cluster_centers_[:32] = X[rng.choice(len(X), 32, replace=False)]
    else:
        model.partial_fit(X[::-1])
    labels = model.predict(X)
    np.testing.assert_array_equal(labels, _argmin(X, model.cluster_centers_))
    assert groupings == [model.cluster_centers_.shape[0]]


def test_a_dask_predict_groups_on_the_client_and_prunes_every_block(groupings, monkeypatch):
    """softkmeans.dask: the centroids are grouped once, on the client (kept across
    predicts), and each block's labels come from the pruned pass (the local scheduler: the
    blocks' tasks run in this process, where the kernel is counted); the labels are the
    NumPy argmin's."""
    da = pytest.importorskip("dask.array")
    from softkmeans import _native
    from softkmeans.dask import SoftKMeans as DaskSoftKMeans

    rows = []
    pruned = _native.assign_grouped
    monkeypatch.setattr(
        _native, "assign_grouped", lambda X, *a: rows.append(len(X)) or pruned(X, *a)
    )
    X = _data()
    dX = da.from_array(X, chunks=(700, 8))
    model = DaskSoftKMeans(64, assignment="hard", init="random", max_iter=3, random_state=0)
    model.fit(dX)
    del groupings[:], rows[:]  # the fit's own passes are not predictions
    first, second = model.predict(dX).compute(), model.predict(dX[:500]).compute()
    assert groupings == [64]
    assert sum(rows) == X.shape[0] + 500
    np.testing.assert_array_equal(first, _argmin(X, model.cluster_centers_))
    np.testing.assert_array_equal(second, first[:500])

"""Annealing that does not lose (issue 25, item 4): on real data sets the annealed J is no
worse than the best of ten k-means++ runs of scikit-learn, and parameters that annealing
would override are refused or warned about."""

from __future__ import annotations

import numpy as np
import pytest

from softkmeans import SoftKMeans

datasets = pytest.importorskip("sklearn.datasets")
KMeans = pytest.importorskip("sklearn.cluster").KMeans


def _standardized(X):
    return (X - X.mean(axis=0)) / X.std(axis=0)


# (data, k): unscaled wine at k = 3 is issue 25's case (annealing ended 11 % above one
# k-means++ run for every seed and cooling); standardized breast-cancer at k = 5 ended
# 12.7 % above the best of ten, standardized wine at k = 5 3.9 % above.
CASES = {
    "wine-unscaled-3": (lambda: datasets.load_wine().data, 3),
    "wine-unscaled-5": (lambda: datasets.load_wine().data, 5),
    "wine-5": (lambda: _standardized(datasets.load_wine().data), 5),
    "breast-cancer-5": (lambda: _standardized(datasets.load_breast_cancer().data), 5),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_annealing_is_as_good_as_the_best_of_ten_kmeans_plusplus_runs(case):
    load, k = CASES[case]
    X = load()
    best = KMeans(k, n_init=10, random_state=0).fit(X).inertia_  # the peer, not our code
    m = SoftKMeans(k, anneal={}, random_state=0).fit(X)
    J = float(((X - m.cluster_centers_[m.labels_]) ** 2).sum())  # J recomputed here
    assert J <= best * (1 + 1e-9)
    assert m.exact_lloyd_


def test_without_split_merge_annealing_follows_the_worse_branch_on_unscaled_wine():
    # What split_merge is for: the annealed branch alone ends well above the best J.
    X = datasets.load_wine().data
    best = KMeans(3, n_init=10, random_state=0).fit(X).inertia_
    m = SoftKMeans(3, anneal={"split_merge": False}, random_state=0).fit(X)
    assert m.inertia_ > 1.05 * best


def test_sigma_with_anneal_is_refused():
    X = np.random.default_rng(0).normal(size=(40, 2))
    for sigma in (0.5, "auto"):
        with pytest.raises(ValueError, match="sigma.*conflicts with anneal"):
            SoftKMeans(2, sigma=sigma, anneal={}).fit(X)


def test_an_assignment_the_schedule_overrides_warns():
    X = np.random.default_rng(0).normal(size=(40, 2))
    with pytest.warns(UserWarning, match="anneal runs with kind='softmax'; assignment='entmax15'"):
        SoftKMeans(2, assignment="entmax15", anneal={}, random_state=0).fit(X)
    # The schedule's own kind, the default and "hard" are no conflict (no warning).
    SoftKMeans(2, assignment="entmax15", anneal={"kind": "entmax15"}, random_state=0).fit(X)
    SoftKMeans(2, assignment="hard", anneal={}, random_state=0).fit(X)

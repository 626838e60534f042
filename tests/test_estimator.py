"""SoftKMeans: scikit-learn compatibility, the KMeans drop-in, weights, dtypes, attributes."""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pandas as pd
import pytest
import threadpoolctl
from sklearn import datasets
from sklearn.base import clone
from sklearn.cluster import KMeans
from sklearn.cluster import kmeans_plusplus as sk_kmeans_plusplus
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

import softkmeans
from conftest import make_blobs
from softkmeans import SoftKMeans, _native
from softkmeans.fit.params import DEFAULT_SIGMA_FRACTION

KINDS = ("hard", "softmax", "entmax15")


def _real_data(name):
    if name == "blobs":
        return make_blobs(1500, 5, 12, centre_scale=6.0)[0]
    return getattr(datasets, f"load_{name}")().data


def _rel(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))


def _blobs(n=300, k=4, d=2, seed=0, std=0.5):
    return make_blobs(n, d, k, seed=seed, spread=std, centre_scale=6.0)[0]


# ------------------------------------------------------------------ drop-in for KMeans


# (data set, k, k-means++ seed, weighted). Weighted fits use tol=0: scikit-learn scales tol
# by the unweighted variance and we by the weighted one (so that weights equal repeated
# rows); with tol=0 the rules coincide. Unweighted fits keep the default tol=1e-4.
LLOYD_CASES = [
    *[
        (name, k, seed, False)
        for name in ("iris", "wine", "digits", "breast_cancer", "blobs")
        for k, seed in ((3, 0), (8, 1))
    ],
    ("breast_cancer", 5, 0, True),
]


@pytest.mark.parametrize(("name", "k", "seed", "weighted"), LLOYD_CASES)
def test_hard_is_kmeans_lloyd_from_the_same_init(name, k, seed, weighted):
    X = _real_data(name)
    w = np.random.default_rng(0).uniform(0.1, 3.0, size=X.shape[0]) if weighted else None
    tol = 0.0 if weighted else 1e-4
    C0, _ = sk_kmeans_plusplus(X, k, random_state=seed, sample_weight=w)
    ref = KMeans(k, init=C0, n_init=1, tol=tol, algorithm="lloyd").fit(X, sample_weight=w)
    got = SoftKMeans(k, assignment="hard", init=C0, tol=tol).fit(X, sample_weight=w)
    np.testing.assert_array_equal(got.labels_, ref.labels_)
    assert got.n_iter_ == ref.n_iter_
    assert _rel(got.cluster_centers_, ref.cluster_centers_) <= 1e-9
    assert abs(got.inertia_ - ref.inertia_) <= 1e-9 * ref.inertia_
    np.testing.assert_array_equal(got.predict(X), ref.predict(X))


def test_hard_follows_the_tolerance_rule():
    # tol > 0 stops on the centroid shift before the labels freeze: over a sweep of tol
    # the stopping iteration moves, and must move exactly as scikit-learn's does.
    X = _real_data("digits")[:800]
    C0, _ = sk_kmeans_plusplus(X, 10, random_state=5)
    stops = set()
    for tol in np.geomspace(1e-4, 1e-1, 40):
        ref = KMeans(10, init=C0, n_init=1, tol=tol, algorithm="lloyd").fit(X)
        got = SoftKMeans(10, assignment="hard", init=C0, tol=tol).fit(X)
        assert got.n_iter_ == ref.n_iter_, tol
        np.testing.assert_array_equal(got.labels_, ref.labels_)
        assert _rel(got.cluster_centers_, ref.cluster_centers_) <= 1e-9
        stops.add(ref.n_iter_)
    assert len(stops) >= 3  # the sweep did exercise the rule


def test_hard_max_iter_reached_relabels_like_kmeans():
    X = _real_data("wine")
    C0, _ = sk_kmeans_plusplus(X, 6, random_state=2)
    ref = KMeans(6, init=C0, n_init=1, max_iter=2, algorithm="lloyd").fit(X)
    got = SoftKMeans(6, assignment="hard", init=C0, max_iter=2).fit(X)
    assert got.n_iter_ == ref.n_iter_ == 2
    np.testing.assert_array_equal(got.labels_, ref.labels_)
    assert _rel(got.cluster_centers_, ref.cluster_centers_) <= 1e-9


# Empty-cluster relocation and n_init / seeding side by side with KMeans:
# tests/test_sklearn_dropin.py.


# ------------------------------------------------------------------ sample weights


@pytest.mark.parametrize("kind", KINDS)
def test_integer_weights_equal_repeated_rows(kind):
    rng = np.random.default_rng(0)
    X = _blobs(120, k=3, seed=1)
    w = rng.integers(1, 4, size=X.shape[0])
    C0 = X[[0, 50, 100]].copy()
    a = SoftKMeans(3, assignment=kind, sigma=0.5, init=C0).fit(X, sample_weight=w)
    b = SoftKMeans(3, assignment=kind, sigma=0.5, init=C0).fit(np.repeat(X, w, axis=0))
    assert a.n_iter_ == b.n_iter_
    assert _rel(a.cluster_centers_, b.cluster_centers_) <= 1e-9
    np.testing.assert_array_equal(a.predict(X), b.predict(X))
    assert abs(a.objective_ - b.objective_) <= 1e-9 * abs(b.objective_)
    assert abs(a.inertia_ - b.inertia_) <= 1e-9 * b.inertia_


@pytest.mark.parametrize("kind", KINDS)
def test_scaling_weights_leaves_centroids_unchanged(kind):
    X = _blobs(150, k=3, seed=2)
    w = np.random.default_rng(1).uniform(0.5, 2.0, size=X.shape[0])
    C0 = X[[0, 1, 2]].copy()
    a = SoftKMeans(3, assignment=kind, sigma=0.5, init=C0).fit(X, sample_weight=w)
    b = SoftKMeans(3, assignment=kind, sigma=0.5, init=C0).fit(X, sample_weight=7.5 * w)
    assert a.n_iter_ == b.n_iter_
    assert _rel(a.cluster_centers_, b.cluster_centers_) <= 1e-12
    assert abs(b.objective_ - 7.5 * a.objective_) <= 1e-9 * abs(b.objective_)


@pytest.mark.parametrize("init", ["k-means++", "random"])
def test_zero_weight_points_are_never_seeds(init):
    X = _blobs(200, k=4, seed=4)
    w = np.ones(200)
    w[100:] = 0.0
    X[100:] += 100.0  # far away: k-means++ would love them if weights were ignored
    for seed in range(5):
        m = SoftKMeans(4, assignment="hard", init=init, max_iter=1, random_state=seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # max_iter=1 may leave a cluster empty
            m.fit(X, sample_weight=w)
        # After one step from seeds among the weighted points every centroid is a mean
        # of weighted points: within the first half's bounding box.
        assert (m.cluster_centers_ < 50).all()


@pytest.mark.parametrize("kind", KINDS)
def test_weights_enter_score_and_objective(kind):
    X = _blobs(100, k=3, seed=5)
    w = np.random.default_rng(2).uniform(0.0, 3.0, size=100)
    m = SoftKMeans(3, assignment=kind, random_state=0).fit(X, sample_weight=w)
    sigma = m.sigma_ if kind != "hard" else None
    expected = softkmeans.objective(X, m.cluster_centers_, sigma, kind=kind, sample_weight=w)
    assert m.objective_ == pytest.approx(expected, rel=1e-12)
    assert m.score(X, sample_weight=w) == pytest.approx(-expected, rel=1e-12)
    assert m.score(X, sample_weight=2 * w) == pytest.approx(-2 * expected, rel=1e-12)


def test_all_zero_weights_are_rejected():
    with pytest.raises(ValueError, match="all zero"):
        SoftKMeans(2).fit(_blobs(20), sample_weight=np.zeros(20))


# ------------------------------------------------------------------ behaviour of each kind


@pytest.mark.parametrize("kind", KINDS)
def test_objective_never_increases_along_the_fit(kind):
    X = _real_data("iris")
    # sigma=None pinned (issue 36 item 12: the default softmax width is now re-estimated).
    m = SoftKMeans(5, assignment=kind, sigma=None, random_state=0, tol=0.0).fit(X)
    obj = m.history_["objective"]
    assert len(obj) == m.n_iter_ == len(m.history_["J"]) == len(m.history_["shift"])
    assert np.all(np.diff(obj) <= 1e-12 * np.abs(obj[:-1]))


def test_default_sigma_is_a_fraction_of_the_critical_sigma():
    X = _real_data("iris")
    m = SoftKMeans(3, sigma=None, random_state=0).fit(X)  # pinned: issue 36 item 12
    assert m.critical_sigma_ == pytest.approx(softkmeans.critical_sigma(X), rel=1e-12)
    assert m.sigma_ == pytest.approx(DEFAULT_SIGMA_FRACTION * m.critical_sigma_, rel=1e-12)
    # Near the critical width everything collapses; the default is well inside the
    # clustered phase: three distinct centroids on iris.
    assert np.unique(m.labels_).size == 3


@pytest.mark.parametrize("kind", KINDS)
def test_fit_is_scale_equivariant(kind):
    # The default sigma follows the data's scale: 8 X gives 8 x the centroids (a power
    # of two, so the scaled arithmetic is exact up to the shifted rounding of sums).
    X = _real_data("iris")
    a = SoftKMeans(3, assignment=kind, random_state=0).fit(X)
    b = SoftKMeans(3, assignment=kind, random_state=0).fit(8.0 * X)
    np.testing.assert_array_equal(a.labels_, b.labels_)
    assert a.n_iter_ == b.n_iter_
    np.testing.assert_allclose(8.0 * a.cluster_centers_, b.cluster_centers_, rtol=1e-9)
    assert b.sigma_ == pytest.approx(8.0 * a.sigma_, rel=1e-12)


def test_entmax15_below_the_threshold_is_exactly_lloyd():
    X = _blobs(300, k=4, seed=6, std=0.3)
    C0 = X[[0, 1, 2, 3]].copy()
    hard = SoftKMeans(4, assignment="hard", init=C0, tol=0.0).fit(X)
    sigma = 0.49 * np.sqrt(softkmeans.margins(X, hard.cluster_centers_).min())
    ent = SoftKMeans(4, assignment="entmax15", sigma=sigma, init=hard.cluster_centers_).fit(X)
    assert ent.exact_lloyd_
    # Equal in exact arithmetic (SPEC.md); the two kernels may sum in different orders.
    np.testing.assert_array_equal(ent.labels_, hard.labels_)
    np.testing.assert_allclose(ent.cluster_centers_, hard.cluster_centers_, rtol=1e-12)
    assert ent.objective_ == pytest.approx(ent.inertia_, rel=1e-12)  # G = J when one-hot
    big = SoftKMeans(4, assignment="entmax15", sigma=2 * sigma, init=hard.cluster_centers_)
    assert not big.fit(X).exact_lloyd_
    assert not SoftKMeans(4, assignment="softmax", sigma=sigma, init=C0).fit(X).exact_lloyd_


@pytest.mark.parametrize("d", [2, 4])
@pytest.mark.parametrize("kind", KINDS)
def test_fitted_attributes_and_methods(kind, d):
    X = _blobs(200, k=3, d=d, seed=7)
    m = SoftKMeans(3, assignment=kind, random_state=0).fit(X)
    assert m.cluster_centers_.shape == (3, d)
    assert m.labels_.shape == (200,)
    assert isinstance(m.n_iter_, int) and isinstance(m.inertia_, float)
    np.testing.assert_array_equal(m.labels_, m.predict(X))
    np.testing.assert_array_equal(m.fit_predict(X), m.labels_)
    # fit_predict and fit_transform of an unfitted estimator: the labels and distances of fit.
    fresh = SoftKMeans(3, assignment=kind, random_state=0)
    np.testing.assert_array_equal(fresh.fit_predict(X), m.labels_)
    np.testing.assert_array_equal(fresh.labels_, m.labels_)
    fresh = SoftKMeans(3, assignment=kind, random_state=0)
    np.testing.assert_allclose(fresh.fit_transform(X), m.transform(X))
    assert m.inertia_ == pytest.approx(
        softkmeans.objective(X, m.cluster_centers_, kind="hard"), rel=1e-12
    )
    assert m.min_margin_ == pytest.approx(
        float(softkmeans.margins(X, m.cluster_centers_).min()), rel=1e-12
    )
    assert m.n_features_in_ == d
    P = m.predict_proba(X)
    np.testing.assert_allclose(P.sum(axis=1), 1.0, rtol=1e-12)
    if kind == "hard":
        np.testing.assert_array_equal(P, np.eye(3)[m.labels_])
    T = m.transform(X)
    np.testing.assert_allclose(T**2, softkmeans.reference.sq_distances(X, m.cluster_centers_))
    np.testing.assert_allclose(m.fit_transform(X), T)
    assert m.score(X) == pytest.approx(-m.objective_, rel=1e-12)
    assert list(m.get_feature_names_out()) == ["softkmeans0", "softkmeans1", "softkmeans2"]


@pytest.mark.parametrize("kind", KINDS)
def test_float32_stays_float32(kind):
    X = _blobs(200, k=3, seed=8).astype(np.float32)
    m = SoftKMeans(3, assignment=kind, random_state=0).fit(X)
    assert m.cluster_centers_.dtype == np.float32
    assert m.transform(X).dtype == np.float32
    assert m.predict_proba(X).dtype == np.float32
    m64 = SoftKMeans(3, assignment=kind, random_state=0).fit(X.astype(np.float64))
    assert _rel(m.cluster_centers_, m64.cluster_centers_) <= 1e-4


# ------------------------------------------------------------------ ecosystem


def test_pipeline_and_grid_search():
    X = _real_data("iris")
    pipe = make_pipeline(StandardScaler(), SoftKMeans(3, assignment="entmax15", random_state=0))
    labels = pipe.fit_predict(X)
    assert np.unique(labels).size == 3
    search = GridSearchCV(
        SoftKMeans(assignment="hard", random_state=0), {"n_clusters": [2, 3, 4]}, cv=3
    )
    search.fit(X)
    # score = -J, which decreases with k: the largest k wins.
    assert search.best_params_ == {"n_clusters": 4}


@pytest.mark.parametrize("copy", ["clone", "pickle"])
@pytest.mark.parametrize("kind", KINDS)
def test_clone_and_pickle_round_trip(kind, copy):
    """A clone refitted on the same data, or an unpickled copy, is the same model."""
    X = _blobs(150, k=3, seed=9)
    m = SoftKMeans(3, assignment=kind, random_state=0).fit(X)
    other = clone(m).fit(X) if copy == "clone" else pickle.loads(pickle.dumps(m))
    assert other.get_params() == m.get_params()
    np.testing.assert_array_equal(other.cluster_centers_, m.cluster_centers_)
    np.testing.assert_array_equal(other.predict(X), m.predict(X))
    np.testing.assert_array_equal(other.predict_proba(X), m.predict_proba(X))


@pytest.mark.parametrize("transform_output", ["default", "pandas"])
def test_pandas_input_sets_feature_names(transform_output):
    X = _blobs(100, k=2, d=4, seed=10)
    df = pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])])
    m = SoftKMeans(2, assignment="hard", random_state=0).set_output(transform=transform_output)
    out = m.fit_transform(df)
    assert list(m.feature_names_in_) == list(df.columns)
    if transform_output == "pandas":
        assert isinstance(out, pd.DataFrame)
        assert list(out.columns) == list(m.get_feature_names_out())
        out = out.to_numpy()
    else:
        assert isinstance(out, np.ndarray)
    plain = SoftKMeans(2, assignment="hard", random_state=0).fit(df)
    np.testing.assert_array_equal(out, plain.transform(df))
    with pytest.warns(UserWarning, match="X does not have valid feature names"):
        m.predict(X)  # scikit-learn's own warning, from its validate_data


def test_threadpoolctl_sees_and_limits_the_engine():
    info = threadpoolctl.threadpool_info()
    assert any(d["user_api"] == "openmp" for d in info)
    with threadpoolctl.threadpool_limits(limits=1, user_api="openmp"):
        assert _native.default_threads() == 1
        X = _blobs(2000, k=8, d=8, seed=11)
        m = SoftKMeans(8, assignment="hard", random_state=0).fit(X)
    m2 = SoftKMeans(8, assignment="hard", random_state=0, n_threads=2).fit(X)
    np.testing.assert_array_equal(m.cluster_centers_, m2.cluster_centers_)


def test_warnings_are_issued_once_per_fit():
    X = np.repeat(np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]]), 10, axis=0)
    X = np.concatenate([X, [[50.0, 50.0]]])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        SoftKMeans(6, assignment="hard", random_state=0, max_iter=20, tol=0).fit(X)
    messages = [str(w.message) for w in caught]
    assert messages, "fewer distinct points than clusters must warn"
    assert len(messages) == len(set(messages))
    assert any("distinct points" in msg for msg in messages)


@pytest.mark.parametrize("verbose", [0, 1])
def test_verbose_prints_one_line_per_iteration_and_zero_is_silent(verbose, capsys):
    X = _real_data("iris")
    m = SoftKMeans(3, assignment="softmax", random_state=0, verbose=verbose).fit(X)
    out = capsys.readouterr().out
    steps = [line for line in out.strip().splitlines() if line.startswith("Iteration ")]
    assert len(steps) == (m.n_iter_ if verbose else 0)
    assert all(", objective " in line and ", sigma " in line for line in steps)
    assert (out == "") == (verbose == 0)


def test_init_callable_and_array_validation():
    X = _blobs(60, k=3, seed=12)

    def first_rows(X, k, random_state):
        return X[:k]

    m = SoftKMeans(3, assignment="hard", init=first_rows).fit(X)
    ref = SoftKMeans(3, assignment="hard", init=X[:3]).fit(X)
    np.testing.assert_array_equal(m.cluster_centers_, ref.cluster_centers_)
    with pytest.raises(ValueError, match="does not match the number of clusters 3"):
        SoftKMeans(3, init=X[:2]).fit(X)
    with pytest.warns(RuntimeWarning, match="only one init"):
        SoftKMeans(3, assignment="hard", init=X[:3], n_init=2).fit(X)


# Bad parameters: tests/test_bad_input.py (test_estimator_bad_input) and, with
# scikit-learn's messages, tests/test_sklearn_dropin.py.


# ------------------------------------------------------------------ check_estimator

_EXPECTED_FAILED = {
    # The check shuffles the weighted copy of the data; seeding (k-means++ or random)
    # draws points by position, so it picks other seeds. scikit-learn's KMeans marks
    # the same check as an expected failure. Equivalence from a fixed init is tested
    # above (test_integer_weights_equal_repeated_rows).
    "check_sample_weight_equivalence_on_dense_data": (
        "seeding depends on row order; the check shuffles the weighted data"
    ),
    "check_sample_weight_equivalence_on_sparse_data": (
        "seeding depends on row order; the check shuffles the weighted data"
    ),
}
# Sparse input is supported (tests/test_sparse.py): fit and predict pass these checks, but
# they then read tags.classifier_tags for predict_proba, which a clusterer does not have.
_SPARSE_CHECKS = {
    name: "the check takes predict_proba for a classifier's (classifier_tags is None)"
    for name in ("check_estimator_sparse_array", "check_estimator_sparse_matrix")
}


@parametrize_with_checks(
    [SoftKMeans(assignment=kind, random_state=0) for kind in KINDS]
    # Annealing starts from the weighted mean, not from seeds: no row-order dependence.
    + [SoftKMeans(assignment="softmax", anneal={"cooling": 0.6, "steps": 30}, random_state=0)]
    + [SoftKMeans(assignment="hard", metric="cosine", random_state=0)],
    expected_failed_checks=lambda est: _SPARSE_CHECKS | ({} if est.anneal else _EXPECTED_FAILED),
)
def test_sklearn_compatible_estimator(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check(estimator)


def test_verbose_on_a_terminal_uses_a_progress_bar_when_tqdm_is_installed():
    import io

    from softkmeans.fit.progress import Progress as _Progress

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    stream = Terminal()
    progress = _Progress(1, total=3, stream=stream)
    assert progress.bar is not None
    for i in range(3):
        progress.line(f"iter {i}")
    progress.close()
    text = stream.getvalue()
    assert all(f"iter {i}" in text for i in range(3))
    assert _Progress(1, total=3, stream=io.StringIO()).bar is None  # not a terminal

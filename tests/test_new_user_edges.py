"""What a new user tripped over (issue 36): cosine predictions on a batch of zero rows
(item 2), data whose squared distances underflow and the duplicate-points warning when
the cause is elsewhere (item 10), the torch API naming its argument (item 16)."""

from __future__ import annotations

import contextlib
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.exceptions import ConvergenceWarning

from softkmeans import SoftKMeans

PER_ROW = ["predict", "predict_proba", "transform"]


def _dask_layout():
    """(the Dask estimator, rows -> a Dask array, the synchronous scheduler's context)."""
    dask = pytest.importorskip("dask")
    da = pytest.importorskip("dask.array")
    from softkmeans.dask import SoftKMeans as DaskSoftKMeans

    return DaskSoftKMeans, lambda A: da.from_array(np.asarray(A), chunks=(2, -1)), (
        dask.config.set(scheduler="synchronous")
    )


@pytest.mark.parametrize("layout", ["dense", "csr", "dask"])
@pytest.mark.parametrize("kind", ["hard", "softmax", "entmax15"])
def test_cosine_zero_rows_get_the_same_answer_alone_as_in_a_mixed_batch(kind, layout):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 4))
    sigma = None if kind == "hard" else 0.3
    cls, as_layout, context = SoftKMeans, np.asarray, contextlib.nullcontext()
    if layout == "csr":
        as_layout = sp.csr_matrix
    elif layout == "dask":
        cls, as_layout, context = _dask_layout()
    zeros = np.zeros((2, 4))
    mixed = np.vstack([X[:3], zeros])
    with context:
        model = cls(3, metric="cosine", assignment=kind, sigma=sigma, random_state=0)
        model.fit(as_layout(X))
        for name in PER_ROW:
            alone = np.asarray(getattr(model, name)(as_layout(zeros)))
            within = np.asarray(getattr(model, name)(as_layout(mixed)))[3:]
            np.testing.assert_array_equal(alone, within, err_msg=name)
        # score sums over rows; a zero row (no direction) adds nothing in either batch.
        assert model.score(as_layout(zeros)) == 0.0
        assert model.score(as_layout(mixed)) == model.score(as_layout(X[:3]))


def test_cosine_fit_on_zero_rows_still_refused():
    with pytest.raises(ValueError, match="no nonzero row"):
        SoftKMeans(2, metric="cosine").fit(np.zeros((5, 3)))


@pytest.mark.parametrize("layout", ["dense", "csr"])
def test_float32_data_whose_squared_distances_underflow_is_refused(layout):
    X = np.random.default_rng(0).random((300, 5)).astype(np.float32) * np.float32(1e-30)
    data = sp.csr_matrix(X) if layout == "csr" else X
    with pytest.raises(ValueError, match="underflow float32.*rescale the data or use float64"):
        SoftKMeans(3, random_state=0).fit(data)


def test_the_same_scale_in_float64_fits():
    X = np.random.default_rng(0).random((300, 5)) * 1e-30
    model = SoftKMeans(3, assignment="hard", random_state=0).fit(X)
    assert np.unique(model.labels_).size == 3


X300 = np.random.default_rng(0).random((300, 5))  # 300 distinct points


@pytest.mark.parametrize(
    "X, params",
    [
        (X300.astype(np.float32), dict(sigma=100.0)),  # every centroid at the mean
        (X300, dict(sigma=0.05, init=X300[[0, 0, 1]], n_init=1)),  # two stay one
    ],
    ids=["sigma", "init"],
)
def test_merged_centroids_are_not_blamed_on_duplicate_points(X, params):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        SoftKMeans(3, assignment="softmax", random_state=0, **params).fit(X)
    messages = [str(w.message) for w in caught if issubclass(w.category, ConvergenceWarning)]
    assert any("though X has 300 distinct points" in m for m in messages), messages
    assert not any("duplicate points" in m for m in messages), messages


def test_torch_names_x_in_the_feature_mismatch():
    torch = pytest.importorskip("torch")
    from softkmeans import torch as skt

    x = torch.zeros((4, 8), dtype=torch.float64)
    centroids = torch.zeros((2, 7), dtype=torch.float64)
    with pytest.raises(ValueError, match="centroids has 7 features but x has 8"):
        skt.free_energy(x, centroids, kind="hard")


def _iris():
    from sklearn.datasets import load_iris

    X = load_iris().data
    return (X - X.mean(axis=0)) / X.std(axis=0)


def test_the_default_softmax_width_is_the_mixtures():
    """Item 12: memberships that mean something by default. The default fit is the
    sigma="auto" fit (the isotropic mixture's posterior), whose memberships are not
    one-hot on iris: some rows have a largest probability below 0.9."""
    X = _iris()
    default = SoftKMeans(3, random_state=0).fit(X)
    auto = SoftKMeans(3, sigma="auto", random_state=0).fit(X)
    assert default.sigma_ == auto.sigma_
    np.testing.assert_array_equal(default.predict_proba(X), auto.predict_proba(X))
    assert (default.predict_proba(X).max(axis=1) < 0.9).mean() > 0.03


@pytest.mark.parametrize(
    "params",
    [dict(assignment="entmax15"), dict(metric="cosine"), dict(sigma=None)],
    ids=["entmax15", "cosine", "None"],
)
def test_where_the_mixture_is_undefined_the_default_is_a_tenth_of_critical(params):
    import softkmeans

    X = _iris()
    model = SoftKMeans(3, random_state=0, **params).fit(X)
    assert model.sigma_ == pytest.approx(0.1 * model.critical_sigma_, rel=1e-12)
    streamed = SoftKMeans(3, random_state=0, **params).partial_fit(X)
    assert streamed.sigma_ == pytest.approx(0.1 * streamed.critical_sigma_, rel=1e-12)
    if params.get("metric") != "cosine":
        assert model.critical_sigma_ == pytest.approx(softkmeans.critical_sigma(X), rel=1e-12)
